/* calib.h - what the DianNao calibration programs share: the launch spelling, the kernels'
 * host wrappers, and the host's timer of one call.
 *
 * Timing: on the MLU CNRT notifiers around the launches (cnrtNotifierDuration, in us:
 * CNRT 5 and later; adapt calib_time here if your site's CNRT differs); under swbuild's
 * emulation (__BANGEMU__) the emulator's modelled cycles of the kernel (its counters, the
 * same numbers its stats file reports). Programs print "seconds" or "cycles" accordingly. */
#ifndef CALIB_H
#define CALIB_H
#include <cnrt.h>

#ifdef __BANGEMU__
#define CALIB_LAUNCH(k, dim, type, q, ...) BANGEMU_LAUNCH(k, dim, type, q, ##__VA_ARGS__)
#else
#define CALIB_LAUNCH(k, dim, type, q, ...) k<<<dim, type, q>>>(__VA_ARGS__)
#endif

#define CALIB_SPAN 65536      /* bytes of each on-chip buffer half and GDRAM half */

extern "C" {
/* task 0 of a Union1 launch (4 tasks) makes `reps` copies of `size` bytes in direction
 * `dir`, in `segs` segments of `size` bytes each (strided) when segs > 1 */
void calib_memcpy(cnrtQueue_t q, char *gdram, int dir, int size, int segs, int reps);
/* Union1 (4 tasks) doing nothing: the launch itself */
void calib_empty(cnrtQueue_t q);
/* one task: reps float __bang_conv of Ci = Co = 64 on an h x h input, k x k kernel */
void calib_conv(cnrtQueue_t q, int h, int k, int reps);
/* reps barriers: __sync_cluster in a Union1 launch (4 tasks), or __sync_all in Union4 (16) */
void calib_sync(cnrtQueue_t q, int all, int reps);
}

#ifndef CALIB_DEVICE
#include <stdio.h>
#include <stdlib.h>
#include <functional>
#ifdef __BANGEMU__
#define CALIB_UNIT "cycles"
/* the modelled cycles the launches made by `call` added to kernel `name` */
static double calib_time(const char *name, const std::function<void()> &call, cnrtQueue_t)
{
    long long before = ::bangemu::S().kernels[name].cycles;
    call();
    return (double)(::bangemu::S().kernels[name].cycles - before);
}
#else
#define CALIB_UNIT "seconds"
static double calib_time(const char *, const std::function<void()> &call, cnrtQueue_t q)
{
    cnrtNotifier_t a, b;
    float us = 0;
    cnrtNotifierCreate(&a);
    cnrtNotifierCreate(&b);
    cnrtPlaceNotifier(a, q);
    call();
    cnrtPlaceNotifier(b, q);
    cnrtQueueSync(q);
    cnrtNotifierDuration(a, b, &us);
    cnrtNotifierDestroy(a);
    cnrtNotifierDestroy(b);
    return us * 1e-6;
}
#endif

static const char *calib_sep = "";
static void calib_begin(const char *program)
{
    printf("{\"program\": \"%s\", \"api\": \"bang\", \"emulated\": %s, \"unit\": \"%s\", \"measurements\": [",
           program,
#ifdef __BANGEMU__
           "true",
#else
           "false",
#endif
           CALIB_UNIT);
}
static void calib_emit(const char *fields)
{
    printf("%s\n  {%s}", calib_sep, fields);
    calib_sep = ",";
}
static int calib_end(void)
{
    printf("\n]}\n");
    return 0;
}
#endif
#endif
