/* timing.c - the modelled clock: cycles the chip would spend, from the toolchain's numbers.
 *
 * Each CPE has a clock in cycles (swemu_cpe.cycles), the host one too; `swemu_rtc()` reads
 * the caller's (a CPE's on a CPE thread, the host's on the host), as `rtc` / `rcsr` read the
 * chip's cycle counter.  Nothing here depends on host timing: the same program gives the same
 * cycles on every machine.  What advances a clock, with the cost model's own formulas
 * (backends/sunway/cost/model.py), so that `swbuild calibrate` run here recovers the file:
 *
 *  - a DMA get or put of `len` bytes in chunks of `chunk` bytes costs its CPE
 *    len / (bw(chunk) / cpes) seconds, bw being the core group's bandwidth for that block
 *    size (`dma_curve`, interpolated in log(size); below its first point proportional to the
 *    size; above its last point max(last, peak * s / (s + half))): all CPEs share it;
 *  - a BCAST_MODE get to the 8 CPEs of each selected row costs its issuer len / width of
 *    the bytes at that per-CPE bandwidth, width = the CPEs receiving it (a row's 8, the
 *    array's 64), as a broadcast box costs each receiver in the cost model;
 *  - a barrier sets its members' clocks to the latest of them plus `row_sync_cycles`
 *    (rows and columns) or `array_sync_cycles` (the array);
 *  - a register message costs its sender `regcomm_message_cycles` (the put's issue interval;
 *    a broadcast to the 7 others costs what one message costs) and reaches its receiver
 *    `regcomm_latency_cycles` after that: a get sets the receiver's clock to at least the
 *    put's end plus the latency, so a CPE forwarding a stream moves one message per
 *    `regcomm_message_cycles`, the sourced rate;
 *  - athread_spawn + athread_join cost the host `spawn_seconds`; the CPEs start at the
 *    host's clock plus that, and the host goes on at the latest CPE's clock.
 *
 * Charged at issue (a transfer in flight is paid by its CPE at once), and compute is not
 * modelled: the cycle counter of a CPE that only computes does not move.
 */
#include "swemu_int.h"

#include <math.h>

/* Defaults = toolchains/sunway.toml; swbuild passes the file's numbers (toolchain.swemu_timing_defines). */
#ifndef SWEMU_CLOCK_HZ
#define SWEMU_CLOCK_HZ 1.45e9
#endif
#ifndef SWEMU_DMA_CURVE_BYTES
#define SWEMU_DMA_CURVE_BYTES 8, 64, 256, 1024, 2048, 8192, 24576
#endif
#ifndef SWEMU_DMA_CURVE_BPS
#define SWEMU_DMA_CURVE_BPS 0.47e9, 1.86e9, 5.99e9, 12.5e9, 15.3e9, 19.1e9, 20.4e9
#endif
#ifndef SWEMU_DMA_FIT_PEAK
#define SWEMU_DMA_FIT_PEAK 20.6e9
#endif
#ifndef SWEMU_DMA_FIT_HALF
#define SWEMU_DMA_FIT_HALF 640
#endif
#ifndef SWEMU_SPAWN_SECONDS
#define SWEMU_SPAWN_SECONDS 10e-6
#endif
#ifndef SWEMU_ROW_SYNC_CYCLES
#define SWEMU_ROW_SYNC_CYCLES 100
#endif
#ifndef SWEMU_ARRAY_SYNC_CYCLES
#define SWEMU_ARRAY_SYNC_CYCLES 200
#endif
#ifndef SWEMU_REGCOMM_LATENCY_CYCLES
#define SWEMU_REGCOMM_LATENCY_CYCLES 10
#endif
#ifndef SWEMU_REGCOMM_MESSAGE_CYCLES
#define SWEMU_REGCOMM_MESSAGE_CYCLES 18.4
#endif

static const double curve_bytes[] = {SWEMU_DMA_CURVE_BYTES};
static const double curve_bps[] = {SWEMU_DMA_CURVE_BPS};
#define NCURVE ((int)(sizeof curve_bytes / sizeof curve_bytes[0]))
_Static_assert(sizeof curve_bytes == sizeof curve_bps, "dma_curve: as many sizes as bandwidths");

double swemu_host_cycles;

/* The core group's DMA bandwidth (bytes/s) for contiguous blocks of s bytes (model.py's _bw_scalar;
 * the toolchain's curve is sorted by size). */
static double bandwidth(double s)
{
    if (s < 1) s = 1;
    if (s <= curve_bytes[0]) return curve_bps[0] * s / curve_bytes[0];
    if (s >= curve_bytes[NCURVE - 1]) {
        double law = (double)SWEMU_DMA_FIT_PEAK * s / (s + (double)SWEMU_DMA_FIT_HALF);
        return law > curve_bps[NCURVE - 1] ? law : curve_bps[NCURVE - 1];
    }
    for (int i = 1; i < NCURVE; i++)
        if (s < curve_bytes[i]) {
            double f = (log(s) - log(curve_bytes[i - 1])) / (log(curve_bytes[i]) - log(curve_bytes[i - 1]));
            return curve_bps[i - 1] + f * (curve_bps[i] - curve_bps[i - 1]);
        }
    return curve_bps[NCURVE - 1];
}

void swemu_time_dma(swemu_cpe *c, long len, long chunk, int width)
{
    double per_cpe = bandwidth((double)chunk) / SWEMU_CPES;
    c->cycles += (double)len / width / per_cpe * SWEMU_CLOCK_HZ;
}

double swemu_sync_cycles(int scope)     /* 0 row, 1 column, 2 array */
{
    return scope == 2 ? SWEMU_ARRAY_SYNC_CYCLES : SWEMU_ROW_SYNC_CYCLES;
}

double swemu_regcomm_latency(void) { return SWEMU_REGCOMM_LATENCY_CYCLES; }

double swemu_regcomm_message(void) { return SWEMU_REGCOMM_MESSAGE_CYCLES; }

double swemu_spawn_cycles(void) { return SWEMU_SPAWN_SECONDS * SWEMU_CLOCK_HZ; }

unsigned long swemu_rtc(void)
{
    swemu_cpe *c = swemu_self;
    return (unsigned long)llround(c ? c->cycles : swemu_host_cycles);
}
