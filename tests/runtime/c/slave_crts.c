/* Slave side of the runtime test program, CRTS spelling (destination first,
 * bsize before stride, CRTS_dma_wait_value). */
#include <slave.h>
#include <crts.h>
#include <simd.h>
#include "prog.h"

#define CAP CRTS_MAX_LDM_SIZE
#define LDMVAR __ldm
typedef crts_rply_t reply_t;
#define MYID CRTS_tid
#define GET(l, m, len, rp) CRTS_dma_iget((l), (m), (len), (rp))
#define PUT(m, l, len, rp) CRTS_dma_iput((m), (l), (len), (rp))
#define GETS(l, m, len, bs, gap, rp) CRTS_dma_iget_stride((l), (m), (len), (bs), (gap), (rp))
#define PUTS(m, l, len, bs, gap, rp) CRTS_dma_iput_stride((m), (l), (len), (bs), (gap), (rp))
#define WAIT(rp, n) CRTS_dma_wait_value((rp), (n))
#define SEEN_WAIT(rp, n) WAIT(rp, n)
#define SYNC_ALL() CRTS_ssync_array()
#define SYNC_ROW() CRTS_ssync_row()
#define SYNC_COL() CRTS_ssync_col()

#define CHECK_IDS() (_MYID == MYID && CRTS_rid == MYID / 8 && CRTS_cid == MYID % 8)

static double vec_extra(int id)          /* 36 * id through floatv8 */
{
    floatv8 a = simd_set_floatv8(1, 2, 3, 4, 5, 6, 7, 8);
    return simd_reduc_plusf(a * (float)id);
}

void k_wait(void *arg)                   /* waits for a reply that never comes */
{
    float *b = ldm_malloc(64);
    reply_t r = 0;
    para_t *p = arg;
    CRTS_dma_iget(b, p->in, 64, &r);
    CRTS_dma_wait_value(&r, 2);
}

#include "slave_common.inc"

/* BCAST_MODE is Athread v1 only: slave_v1.c has the real kernels */
void k_bcast_row(void *arg) { (void)arg; }
void k_bcast_all(void *arg) { (void)arg; }
void k_bcast_bad(void *arg) { (void)arg; }
void k_bcast_mask0(void *arg) { (void)arg; }
void k_row_mode(void *arg) { (void)arg; }
