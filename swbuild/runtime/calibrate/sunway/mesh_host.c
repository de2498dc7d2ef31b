/* mesh_host.c - the mesh program: barriers, register messages (Athread v1), spawn + join
 * of an empty kernel (timed on the MPE), vector and scalar multiply-add loops. Prints one
 * JSON document; argument: repetitions. */
#include "calib_host.h"

extern void SLAVE_FUN(k_empty)(void *);
extern void SLAVE_FUN(k_sync)(void *);
extern void SLAVE_FUN(k_fma)(void *);
#ifdef CALIB_V1
extern void SLAVE_FUN(k_regcomm)(void *);
#endif

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 32;
    char f[256];
    unsigned long t0, t1;
    calib_begin("mesh");
    for (int width = 8; width <= 64; width *= 8) {
        CALIB_RUN(k_sync, 0, 0, 0, reps, 0, width);
        snprintf(f, sizeof f, "\"kind\": \"sync\", \"width\": %d, \"ops\": %d, \"cycles\": %lu", width, reps, calib_max());
        calib_emit(f);
    }
#ifdef CALIB_V1
    CALIB_RUN(k_regcomm, 0, 0, 0, reps, 0, 8);
    snprintf(f, sizeof f, "\"kind\": \"regcomm\", \"round_trips\": %d, \"cycles\": %lu", reps, calib_max());
    calib_emit(f);
#endif
    CALIB_RUN(k_empty, 0, 0, 0, 1, 0, 0);   /* the first spawn starts the CPEs: not timed */
    t0 = calib_rtc();
    for (int r = 0; r < reps; r++) CALIB_RUN(k_empty, 0, 0, 0, 1, 0, 0);
    t1 = calib_rtc();
    snprintf(f, sizeof f, "\"kind\": \"spawn\", \"ops\": %d, \"cycles\": %lu", reps, t1 - t0);
    calib_emit(f);
    for (int simd = 1; simd >= 0; simd--) {
        CALIB_RUN(k_fma, 0, 0, 0, reps, simd, 0);
        snprintf(f, sizeof f, "\"kind\": \"%s\", \"fma\": %d, \"cycles\": %lu", simd ? "fma_simd" : "fma_scalar",
                 reps * 256 * 8, calib_max());
        calib_emit(f);
    }
    return calib_end();
}
