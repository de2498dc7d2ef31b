/* dma.h - Athread v1 DMA types (SW26010), emulated by swbuild's libswemu.a. */
#ifndef SWEMU_DMA_H
#define SWEMU_DMA_H

#include "swemu.h"

typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;
typedef enum { DMA_PUT, DMA_GET, DMA_PUT_P, DMA_GET_P, DMA_BARRIER = 5 } DMA_OP;
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;

#endif
