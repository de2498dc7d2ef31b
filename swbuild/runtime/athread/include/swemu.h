/* swemu.h - shared core of swbuild's Athread emulation headers (host and slave side).
 *
 * Generated Sunway code is compiled with gcc against these headers and linked with
 * libswemu.a: 64 CPEs become POSIX threads, each with its own LDM arena, and every DMA
 * is checked and counted.  Nothing here is meant to be called by user code directly;
 * the public headers (athread.h, slave.h, dma.h, simd.h, crts.h) map onto it.
 */
#ifndef SWEMU_H
#define SWEMU_H

#include <stddef.h>

#if defined(SWEMU_API_V1) && defined(SWEMU_API_CRTS)
#error "swemu: define only one of SWEMU_API_V1 (SW26010) and SWEMU_API_CRTS (SW26010-Pro)"
#endif
#if !defined(SWEMU_API_V1) && !defined(SWEMU_API_CRTS)
#error "swemu: define SWEMU_API_V1 (SW26010) or SWEMU_API_CRTS (SW26010-Pro); swbuild's emulated toolchains do"
#endif

#ifndef SWEMU_CPES
#define SWEMU_CPES 64
#endif
#if SWEMU_CPES % 8 != 0 || SWEMU_CPES <= 0
#error "swemu: SWEMU_CPES must be a positive multiple of 8 (rows of 8 CPEs)"
#endif
#ifndef SWEMU_LDM_BYTES
#ifdef SWEMU_API_CRTS
#define SWEMU_LDM_BYTES 262144
#else
#define SWEMU_LDM_BYTES 65536
#endif
#endif

/* LDM variables (__thread_local, __ldm): one copy per CPE thread. */
#if defined(__cplusplus)
#define SWEMU_LDM_VAR thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define SWEMU_LDM_VAR _Thread_local   /* also accepts `__thread_local static int x;` */
#else
#define SWEMU_LDM_VAR __thread
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Id of the calling CPE thread (0..SWEMU_CPES-1); -1 on the host thread. */
extern __thread int swemu_tid;

int swemu_spawn(void *fn, void *arg, const char *name);
void swemu_simd_misaligned(const void *p, unsigned long align, const char *op)
    __attribute__((noreturn));

/* One DMA entry point for both APIs: `mem` is the main-memory side, `ldm` the LDM side. */
int swemu_dma(const char *op, int put, void *mem, void *ldm, long len,
              long bsize, long stride, volatile int *reply);
void swemu_sync(int scope, int mask, const char *op);
/* Waits until *reply == value, landing the DMA in flight on it (SWEMU_DMA=wait lands
 * transfers here); an error if it can never happen.  Generated v1 code waits with it
 * under emulation (SWEMU_REPLY_WAIT); `while (reply != value);` works too, see README. */
void swemu_reply_wait(volatile int *reply, int value);
#define SWEMU_REPLY_WAIT(rp, value) swemu_reply_wait(&(rp), (value))

/* Register communication (SW26010, slave.h's REG_PUTR/REG_GETR/REG_PUTC/REG_GETC): dir 0
 * the CPE's mesh row, 1 its column; dst the receiver's position, or 8 for all the others. */
void swemu_rc_put(int dir, const void *v, size_t size, int dst, const char *op);
void swemu_rc_get(int dir, void *v, size_t size, const char *op);

/* The caller's modelled cycle counter (a CPE's on a CPE, the host's on the host): what the
 * chip's `rtc` would read, from the toolchain's cost numbers (src/timing.c). */
unsigned long swemu_rtc(void);

/* Host side: names a main-memory array for the emulator's reports ("name+offset"). */
void swemu_register(const void *p, size_t bytes, const char *name);

void *ldm_malloc(size_t size);
void ldm_free(void *p, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* SWEMU_H */
