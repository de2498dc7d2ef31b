/* BANG C on g++: swbuild's emulation of a Cambricon MLU (DianNao architecture).
 *
 * A .mlu file compiles with `g++ -x c++ -std=c++17 -I<this dir> -DBANGEMU_...` and links
 * with -pthread. Header-only. See ../README.md for the API, the rules checked, the cost
 * model and the stats file. */
#ifndef BANGEMU_BANG_H
#define BANGEMU_BANG_H

#include "bangemu/config.h"
#include "bangemu/core.h"
#include "bangemu/sched.h"
#include "bangemu/memcpy.h"
#include "bangemu/sram2sram.h"
#include "bangemu/vector.h"
#include "bangemu/conv.h"
#include "bangemu/transpose.h"
#include "cnrt.h"

#endif
