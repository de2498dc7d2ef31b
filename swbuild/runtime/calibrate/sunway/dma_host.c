/* dma_host.c - the DMA program: contiguous gets and puts by size, strided ones by block
 * size, broadcast gets (Athread v1). Prints one JSON document; argument: repetitions. */
#include "calib_host.h"

extern void SLAVE_FUN(k_dma)(void *);
#ifdef CALIB_V1
extern void SLAVE_FUN(k_bcast)(void *);
#endif

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 32;
    char f[256];
    calib_begin("dma");
    for (int put = 0; put < 2; put++)
        for (int len = 8; len <= CALIB_MAX_LEN; len *= 2) {
            CALIB_RUN(k_dma, len, 0, 0, reps, put, 1);
            snprintf(f, sizeof f, "\"kind\": \"dma\", \"dir\": \"%s\", \"bytes\": %d, \"bsize\": 0, \"ops\": %d, "
                     "\"cpes\": %d, \"cycles\": %lu", put ? "put" : "get", len, reps, CALIB_CPES, calib_max());
            calib_emit(f);
        }
    for (int put = 0; put < 2; put++)   /* 16 KB in blocks, a gap of one block between them */
        for (int b = 64; b <= 4096; b *= 4) {
            CALIB_RUN(k_dma, 16384, b, b, reps, put, 1);
            snprintf(f, sizeof f, "\"kind\": \"dma_strided\", \"dir\": \"%s\", \"bytes\": 16384, \"bsize\": %d, "
                     "\"ops\": %d, \"cpes\": %d, \"cycles\": %lu", put ? "put" : "get", b, reps, CALIB_CPES, calib_max());
            calib_emit(f);
        }
#ifdef CALIB_V1
    for (int width = 8; width <= 64; width *= 8)
        for (int len = 256; len <= 16384; len *= 8) {
            CALIB_RUN(k_bcast, len, 0, 0, reps, 0, width);
            snprintf(f, sizeof f, "\"kind\": \"bcast\", \"width\": %d, \"bytes\": %d, \"ops\": %d, \"cycles\": %lu",
                     width, len, reps, calib_max());
            calib_emit(f);
        }
#endif
    return calib_end();
}
