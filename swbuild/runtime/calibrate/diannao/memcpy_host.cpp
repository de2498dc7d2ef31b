/* memcpy_host.cpp - the memcpy program: __memcpy in every direction by size, and strided
 * (GDRAM2NRAM in segments), each as (launch with reps copies) - (empty launch).
 * Prints one JSON document; argument: repetitions. */
#include "calib.h"

static const char *DIRS[] = {"GDRAM2NRAM", "NRAM2GDRAM", "GDRAM2WRAM", "WRAM2GDRAM", "GDRAM2SRAM",
                             "SRAM2GDRAM", "NRAM2NRAM", "NRAM2WRAM", "WRAM2NRAM", "NRAM2SRAM",
                             "SRAM2NRAM", "SRAM2WRAM", "WRAM2SRAM", "SRAM2SRAM", "GDRAM2GDRAM"};

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 32;
    char f[256], *gdram;
    cnrtQueue_t q;
    cnrtInit(0);
    cnrtQueueCreate(&q);
    cnrtMalloc((void **)&gdram, 4 * CALIB_SPAN);
    calib_begin("memcpy");
    double empty = calib_time("k_empty", [&] { calib_empty(q); }, q);
    for (int dir = 0; dir < 15; ++dir)
        for (int size = 128; size <= CALIB_SPAN; size *= 8) {
            double t = calib_time("k_memcpy", [&] { calib_memcpy(q, gdram, dir, size, 1, reps); }, q);
            snprintf(f, sizeof f, "\"kind\": \"memcpy\", \"dir\": \"%s\", \"bytes\": %d, \"segments\": 1, \"ops\": %d, "
                     "\"time\": %.9g, \"empty_launch\": %.9g", DIRS[dir], size, reps, t, empty);
            calib_emit(f);
        }
    for (int segs = 4; segs <= 64; segs *= 4) {   /* 256-B segments, GDRAM2NRAM */
        double t = calib_time("k_memcpy", [&] { calib_memcpy(q, gdram, 0, 256, segs, reps); }, q);
        snprintf(f, sizeof f, "\"kind\": \"memcpy\", \"dir\": \"GDRAM2NRAM\", \"bytes\": 256, \"segments\": %d, "
                 "\"ops\": %d, \"time\": %.9g, \"empty_launch\": %.9g", segs, reps, t, empty);
        calib_emit(f);
    }
    cnrtFree(gdram);
    cnrtQueueDestroy(q);
    return calib_end();
}
