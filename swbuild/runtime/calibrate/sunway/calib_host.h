/* calib_host.h - the host (MPE) half every calibration program shares: spawn a kernel over
 * the 64 CPEs with its parameters and take the slowest CPE's cycles; print JSON. */
#ifndef CALIB_HOST_H
#define CALIB_HOST_H
#define CALIB_HOST 1
#include <athread.h>
#include <stdio.h>
#include <stdlib.h>
#include "calib.h"

#define CALIB_CPES 64
static calib_params calib_p __attribute__((aligned(64)));
static unsigned long calib_out[CALIB_CPES] __attribute__((aligned(64)));
static char *calib_mem;
static const char *calib_sep = "";

static void calib_begin(const char *program)
{
    athread_init();
    if (posix_memalign((void **)&calib_mem, 64, (size_t)CALIB_CPES * CALIB_REGION)) { perror("posix_memalign"); exit(1); }
    for (size_t i = 0; i < (size_t)CALIB_CPES * CALIB_REGION; i++) calib_mem[i] = (char)i;
    printf("{\"program\": \"%s\", \"api\": \"%s\", \"emulated\": %s, \"cpes\": %d, \"measurements\": [",
           program, CALIB_API,
#ifdef CALIB_EMULATED
           "true",
#else
           "false",
#endif
           CALIB_CPES);
}

/* The slowest CPE's result of the last kernel. */
static unsigned long calib_max(void)
{
    unsigned long m = 0;
    for (int i = 0; i < CALIB_CPES; i++) if (calib_out[i] > m) m = calib_out[i];
    return m;
}

/* One measurement: a JSON object whose fields the caller formats (no braces). */
static void calib_emit(const char *fields)
{
    printf("%s\n  {%s}", calib_sep, fields);
    calib_sep = ",";
}

static int calib_end(void)
{
    printf("\n]}\n");
    athread_halt();
    free(calib_mem);
    return 0;
}

#define CALIB_RUN(kernel, len_, bsize_, stride_, reps_, put_, width_) do {                         \
        calib_p = (calib_params){calib_mem, calib_out, (len_), (bsize_), (stride_), (reps_), (put_), (width_)}; \
        athread_spawn(kernel, &calib_p);                                                            \
        athread_join();                                                                             \
    } while (0)
#endif
