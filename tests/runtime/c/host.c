/* Host side of the runtime test program: `prog MODE [DUMPFILE]`.
 * MODE "run" spawns the good kernels and dumps all arrays to DUMPFILE for numpy checks;
 * MODE "bcast" runs the v1 BCAST_MODE kernels and dumps out, out2, out3 and res;
 * the other modes each trigger one fatal runtime error (or skip athread_halt). */
#include <athread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "prog.h"

#define KERNELS(X) X(k_counts) X(k_stride) X(k_conflict) X(k_selfover) X(k_rewrite) X(k_barrier) \
    X(k_simd) X(k_leak) X(k_full) X(k_heap_over) X(k_stack_over) X(k_bad_main) \
    X(k_bad_ldm) X(k_bad_reply) X(k_bad_len) X(k_bad_free) X(k_deadlock) X(k_wait) X(k_misalign) X(k_sleep) \
    X(k_bcast_row) X(k_bcast_all) X(k_bcast_bad) X(k_bcast_mask0) X(k_row_mode) X(k_inflight)
#define DECL(k) extern void SLAVE_FUN(k)(void *);
KERNELS(DECL)

static float in[NF], out[NF], out2[NF], out3[NF], out4[NF];
static int shared[192], res[192], tl[192];

int main(int argc, char **argv)
{
    para_t p = {in, out, out2, out3, out4, shared, res, tl, 0, 0};
    const char *mode = argc > 1 ? argv[1] : "run";
    for (int i = 0; i < NF; i++) in[i] = (float)i;
    memset(shared, 0xff, sizeof shared);
    athread_join();                      /* join without spawn: harmless */
    athread_init();
    if (!strcmp(mode, "run")) {
        athread_spawn(k_counts, &p); athread_join();
        athread_spawn(k_stride, &p); athread_join();
        athread_spawn(k_counts, &p); athread_join();
        printf("conflict_base=%p\n", (void *)out2);
        fflush(stdout);
        athread_spawn(k_conflict, &p); athread_join();
        athread_spawn(k_selfover, &p); athread_join();
        athread_spawn(k_rewrite, &p); athread_join();
        athread_spawn(k_barrier, &p); athread_join();
        athread_spawn(k_simd, &p); athread_join();
        athread_spawn(k_leak, &p); athread_join();
        athread_spawn(k_full, &p); athread_join();
        athread_halt();
        if (argc > 2) {
            FILE *f = fopen(argv[2], "wb");
            fwrite(out, sizeof out, 1, f); fwrite(out2, sizeof out2, 1, f);
            fwrite(out3, sizeof out3, 1, f); fwrite(out4, sizeof out4, 1, f);
            fwrite(shared, sizeof shared, 1, f); fwrite(res, sizeof res, 1, f);
            fwrite(tl, sizeof tl, 1, f);
            fclose(f);
        }
        return 0;
    }
    if (!strcmp(mode, "inflight")) {        /* gets in flight across barriers (run with SWEMU_SPIN_US) */
        p.heap1 = argc > 2 ? atol(argv[2]) : 100;   /* rounds */
        athread_spawn(k_inflight, &p); athread_join();
        athread_halt();
        return 0;
    }
    if (!strcmp(mode, "bcast")) {           /* v1 BCAST_MODE kernels (no-ops under CRTS) */
        memset(out, 0, sizeof out); memset(out2, 0, sizeof out2); memset(out3, 0, sizeof out3);
        shared[0] = 1;
        athread_spawn(k_bcast_row, &p); athread_join();
        athread_spawn(k_bcast_all, &p); athread_join();
        athread_halt();
        if (argc > 2) {
            FILE *f = fopen(argv[2], "wb");
            fwrite(out, sizeof out, 1, f); fwrite(out2, sizeof out2, 1, f);
            fwrite(out3, sizeof out3, 1, f); fwrite(res, sizeof res, 1, f);
            fclose(f);
        }
        return 0;
    }
    if (!strcmp(mode, "nohalt")) {          /* stats must still be written at exit */
        athread_spawn(k_counts, &p); athread_join();
        athread_spawn(k_leak, &p); athread_join();
        return 0;
    }
    if (!strcmp(mode, "heap")) {
        p.heap1 = atol(argv[2]); p.heap2 = atol(argv[3]);
        athread_spawn(k_heap_over, &p);
    } else if (!strcmp(mode, "stack")) athread_spawn(k_stack_over, &p);
    else if (!strcmp(mode, "badmain")) athread_spawn(k_bad_main, &p);
    else if (!strcmp(mode, "badldm")) athread_spawn(k_bad_ldm, &p);
    else if (!strcmp(mode, "badreply")) athread_spawn(k_bad_reply, &p);
    else if (!strcmp(mode, "badlen")) athread_spawn(k_bad_len, &p);
    else if (!strcmp(mode, "badfree")) athread_spawn(k_bad_free, &p);
    else if (!strcmp(mode, "deadlock")) athread_spawn(k_deadlock, &p);
    else if (!strcmp(mode, "wait")) athread_spawn(k_wait, &p);
    else if (!strcmp(mode, "misalign")) athread_spawn(k_misalign, &p);
    else if (!strcmp(mode, "sleep")) athread_spawn(k_sleep, &p);
    else if (!strcmp(mode, "bcastbad")) {
        p.heap1 = argc > 2 ? atol(argv[2]) : 0;
        athread_spawn(k_bcast_bad, &p);
    } else if (!strcmp(mode, "bcastmask0")) athread_spawn(k_bcast_mask0, &p);
    else if (!strcmp(mode, "rowmode")) athread_spawn(k_row_mode, &p);
    else if (!strcmp(mode, "twice")) { athread_spawn(k_sleep, &p); athread_spawn(k_counts, &p); }
    else if (!strcmp(mode, "halted")) { athread_halt(); athread_spawn(k_counts, &p); }
    athread_join();
    athread_halt();
    return 0;
}
