/* athread.h - host (MPE) side of the Athread API, emulated by swbuild's libswemu.a.
 * Same host calls for SW26010 (Athread v1) and SW26010-Pro (athread v2 / CRTS). */
#ifndef SWEMU_ATHREAD_H
#define SWEMU_ATHREAD_H

#include "swemu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLAVE_FUN(x) slave_##x

/* rtc(): the MPE's cycle counter (the `rtc` instruction on the chip, read by the generated
 * runner's timings); here the host's modelled clock (swemu.h's swemu_rtc, src/timing.c). */
#define rtc() swemu_rtc()

int athread_init(void);
int athread_join(void);
int athread_halt(void);

#ifdef SWEMU_API_V1
/* v1 shape: __real_athread_spawn(fn, arg).  The macro also passes #f so that the
 * emulator keeps its counters per kernel name. */
int __real_athread_spawn(void *fn, void *arg);
#define athread_spawn(f, arg) \
    swemu_spawn((void *)&SLAVE_FUN(f), (void *)(arg), #f)
#else
/* v2 shape: a three-argument real spawn; halt is a no-op on the chip (here: stats). */
int __real_athread_spawn(void *fn, void *arg, int flag);
#define athread_spawn(f, arg) \
    swemu_spawn((void *)&SLAVE_FUN(f), (void *)(arg), #f)
#define CRTS_init() athread_init()
#endif

#ifdef __cplusplus
}
#endif
#endif
