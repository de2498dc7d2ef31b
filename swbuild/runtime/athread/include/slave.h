/* slave.h - CPE side of Athread v1 (SW26010), emulated by swbuild's libswemu.a.
 * Under SWEMU_API_CRTS it is the SW26010-Pro slave header and pulls in crts.h. */
#ifndef SWEMU_SLAVE_H
#define SWEMU_SLAVE_H

#include "swemu.h"

#ifdef SWEMU_API_CRTS
#include "crts.h"
#else
#include "dma.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LDM variables: each CPE thread gets its own copy (thread-local storage).  The
 * emulator counts their total size against every CPE's LDM capacity. */
#define __thread_local SWEMU_LDM_VAR
#define __thread_local_fix SWEMU_LDM_VAR

/* DMA, source first: get = main memory -> LDM, put = LDM -> main memory.  bsize is the
 * contiguous chunk in main memory, stride the gap skipped between chunks; 0 = contiguous.
 * The copy completes inside the call; the reply word then grows by 1 (atomically). */
int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
                int stride, int bsize);
int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride,
                int bsize);
int athread_get_id(int core);
int athread_get_core(int id);
int athread_syn(scope scp, int mask);

/* Register communication: one 256-bit message (any variable of at most 32 bytes: intv8,
 * doublev4, floatv4...) to the CPE at position `dst` of this CPE's row (PUTR) or column
 * (PUTC), 8 = to the other 7; GET takes the oldest message received and waits for one.
 * On the chip these are the putr/putc/getr/getc instructions, usually written as inline
 * asm macros of these names; generated code defines those only when these are absent. */
#define REG_PUTR(var, dst) do { __typeof__(var) swemu_rc_v_ = (var); \
        swemu_rc_put(0, &swemu_rc_v_, sizeof swemu_rc_v_, (dst), "putr"); } while (0)
#define REG_PUTC(var, dst) do { __typeof__(var) swemu_rc_v_ = (var); \
        swemu_rc_put(1, &swemu_rc_v_, sizeof swemu_rc_v_, (dst), "putc"); } while (0)
#define REG_GETR(var) swemu_rc_get(0, &(var), sizeof(var), "getr")
#define REG_GETC(var) swemu_rc_get(1, &(var), sizeof(var), "getc")

#define _MYID ((int)swemu_tid)
#define _PEN ((int)swemu_tid)
#define _ROW ((int)swemu_tid / 8)
#define _COL ((int)swemu_tid % 8)
#define _CGN 0

#ifdef __cplusplus
}
#endif
#endif /* SWEMU_API_CRTS */
#endif
