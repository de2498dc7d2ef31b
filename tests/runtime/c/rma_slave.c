/* Kernels of the RMA suite (SW26010-Pro CRTS_rma_*): one clean kernel using every form,
 * and one kernel per rule the chip would break on. */
#include <slave.h>
#include "rma.h"

/* Reply words: LDM variables, at the same offset in every CPE (RMA addresses them there). */
__thread_local crts_rply_t lr1, rr1, lr2, rr2, lr3, rr3, lr4, rr4, lr5, rr5, dr;

static void zero_replies(void)
{
    lr1 = rr1 = lr2 = rr2 = lr3 = rr3 = lr4 = rr4 = lr5 = rr5 = dr = 0;
}

static long sum(const float *b)
{
    double s = 0;
    for (int i = 0; i < RMA_N; i++) s += b[i];
    return (long)s;
}

static void fill(float *b, float v)
{
    for (int i = 0; i < RMA_N; i++) b[i] = v;
}

void k_rma_ok(void *arg)
{
    rmapara_t *p = arg;
    int id = CRTS_tid, row = CRTS_rid, col = CRTS_cid;
    float *b = ldm_malloc(4 * RMA_N), *x = ldm_malloc(4 * RMA_N), *y = ldm_malloc(4 * RMA_N);
    long r[RMA_CHECKS];
    int nd = 0;                        /* DMA replies expected on dr */
    zero_replies();
    CRTS_ssync_array();                /* every CPE's buffers and reply words exist first */
    /* 1. column 0 fetches its row's block and broadcasts it along the row, in place */
    if (col == 0) {
        CRTS_dma_iget(b, p->in + RMA_N * row, 4 * RMA_N, &dr);
        CRTS_dma_wait_value(&dr, ++nd);
        CRTS_rma_row_ibcast(b, b, 4 * RMA_N, &lr1, &rr1);
    }
    CRTS_rma_wait_value(&rr1, 1);
    r[0] = sum(b);
    /* 2. row 0 fetches its column's block into b and broadcasts it to x along the column */
    CRTS_ssync_array();                /* b is read (1.) everywhere before row 0 refills it */
    if (row == 0) {
        if (col == 0) CRTS_rma_wait_value(&lr1, 1);
        CRTS_dma_iget(b, p->in + RMA_N * (8 + col), 4 * RMA_N, &dr);
        CRTS_dma_wait_value(&dr, ++nd);
        CRTS_rma_col_ibcast(x, b, 4 * RMA_N, &lr2, &rr2);
    }
    CRTS_rma_wait_value(&rr2, 1);
    r[1] = sum(x);
    if (row == 0) CRTS_rma_wait_value(&lr2, 1);
    /* 3. a ring along the row: each CPE puts RMA_N x its id into its right neighbour's x */
    CRTS_ssync_array();                /* x is read (2.) everywhere before it is overwritten */
    fill(b, (float)id);
    CRTS_rma_iput(b, &lr3, 4 * RMA_N, row * 8 + (col + 1) % 8, x, &rr3);
    CRTS_rma_wait_value(&rr3, 1);
    r[2] = sum(x);
    CRTS_rma_wait_value(&lr3, 1);
    /* 4. each CPE gets its right neighbour's y (RMA_N x 2 its id) */
    fill(y, 2.0f * id);
    CRTS_ssync_array();                /* y is filled everywhere before anyone reads it */
    CRTS_rma_iget(x, &lr4, 4 * RMA_N, row * 8 + (col + 1) % 8, y, &rr4);
    CRTS_rma_wait_value(&lr4, 1);
    r[3] = sum(x);
    CRTS_rma_wait_value(&rr4, 1);      /* my y was read by my left neighbour */
    /* 5. CPE 0 broadcasts block 16 to every CPE's y */
    CRTS_ssync_array();
    if (id == 0) {
        CRTS_dma_iget(b, p->in + RMA_N * 16, 4 * RMA_N, &dr);
        CRTS_dma_wait_value(&dr, ++nd);
        CRTS_rma_ibcast(y, b, &lr5, 4 * RMA_N, &rr5);
    }
    CRTS_rma_wait_value(&rr5, 1);
    r[4] = sum(y);
    if (id == 0) CRTS_rma_wait_value(&lr5, 1);
    CRTS_dma_iput(p->res + RMA_CHECKS * id, r, sizeof r, &dr);
    CRTS_dma_wait_value(&dr, ++nd);
    ldm_free(y, 4 * RMA_N);
    ldm_free(x, 4 * RMA_N);
    ldm_free(b, 4 * RMA_N);
}

/* The issuer writes its source before the reply says it was read. */
void k_rma_src_write(void *arg)
{
    float *b = ldm_malloc(4 * RMA_N);
    (void)arg;
    zero_replies();
    fill(b, 1.0f);
    CRTS_ssync_array();
    if (CRTS_cid == 0) {
        CRTS_rma_row_ibcast(b, b, 4 * RMA_N, &lr1, &rr1);
        b[3] = 2.0f;
        CRTS_rma_wait_value(&lr1, 1);
    }
    CRTS_rma_wait_value(&rr1, 1);
    CRTS_ssync_array();
    ldm_free(b, 4 * RMA_N);
}

/* The issuer (a receiver too) stores into its destination before waiting for it. */
void k_rma_dst_early(void *arg)
{
    float *b = ldm_malloc(4 * RMA_N), *x = ldm_malloc(4 * RMA_N);
    (void)arg;
    zero_replies();
    fill(b, 1.0f);
    CRTS_ssync_array();
    if (CRTS_tid == 0) {
        CRTS_rma_ibcast(x, b, &lr1, 4 * RMA_N, &rr1);
        x[5] = 3.0f;
    }
    CRTS_rma_wait_value(&rr1, 1);
    CRTS_ssync_array();
    if (CRTS_tid == 0) CRTS_rma_wait_value(&lr1, 1);
    ldm_free(x, 4 * RMA_N);
    ldm_free(b, 4 * RMA_N);
}

/* CPE 9 waits for two landings; one RMA was sent to it. */
void k_rma_overwait(void *arg)
{
    float *b = ldm_malloc(4 * RMA_N);
    (void)arg;
    zero_replies();
    fill(b, 1.0f);
    CRTS_ssync_array();
    if (CRTS_cid == 0) CRTS_rma_row_ibcast(b, b, 4 * RMA_N, &lr1, &rr1);
    CRTS_rma_wait_value(&rr1, CRTS_tid == 9 ? 2 : 1);
    if (CRTS_cid == 0) CRTS_rma_wait_value(&lr1, 1);
    ldm_free(b, 4 * RMA_N);
}

/* CPE 10 returns without waiting for the broadcast into its LDM (static LDM data here). */
__thread_local float tl[RMA_N];

void k_rma_unwaited(void *arg)
{
    (void)arg;
    zero_replies();
    fill(tl, 1.0f);
    CRTS_ssync_array();
    if (CRTS_cid == 0) {
        CRTS_rma_row_ibcast(tl, tl, 4 * RMA_N, &lr1, &rr1);
        CRTS_rma_wait_value(&lr1, 1);
    }
    if (CRTS_tid != 10) CRTS_rma_wait_value(&rr1, 1);
}

/* CPE 1 never allocates the buffer CPE 0 puts into. */
void k_rma_unalloc(void *arg)
{
    float *b = CRTS_tid == 1 ? 0 : ldm_malloc(4 * RMA_N);
    (void)arg;
    zero_replies();
    CRTS_ssync_array();
    if (CRTS_tid == 0) {
        fill(b, 1.0f);
        CRTS_rma_iput(b, &lr1, 4 * RMA_N, 1, b, &rr1);
        CRTS_rma_wait_value(&lr1, 1);
    }
    CRTS_ssync_array();
    if (b) ldm_free(b, 4 * RMA_N);
}

/* The issuer frees its source while the broadcast is in flight. */
void k_rma_free(void *arg)
{
    float *b = ldm_malloc(4 * RMA_N), *x = ldm_malloc(4 * RMA_N);
    (void)arg;
    zero_replies();
    fill(x, 1.0f);
    CRTS_ssync_array();
    if (CRTS_tid == 0) {
        CRTS_rma_row_ibcast(b, x, 4 * RMA_N, &lr1, &rr1);
        ldm_free(x, 4 * RMA_N);
        x = 0;
    }
    CRTS_rma_wait_value(&rr1, CRTS_rid == 0 ? 1 : 0);
    CRTS_ssync_array();
    if (x) ldm_free(x, 4 * RMA_N);
    ldm_free(b, 4 * RMA_N);
}

/* The issuer broadcasts a buffer whose DMA get has not been waited for. */
void k_rma_dma_src(void *arg)
{
    rmapara_t *p = arg;
    float *b = ldm_malloc(4 * RMA_N);
    zero_replies();
    CRTS_ssync_array();
    if (CRTS_cid == 0) {
        CRTS_dma_iget(b, p->in, 4 * RMA_N, &dr);
        CRTS_rma_row_ibcast(b, b, 4 * RMA_N, &lr1, &rr1);
        CRTS_dma_wait_value(&dr, 1);
    }
    CRTS_rma_wait_value(&rr1, 1);
    CRTS_ssync_array();
    ldm_free(b, 4 * RMA_N);
}

/* CPE 0 puts RMA_CLOCK_BYTES to CPE 1: each reports the cycles it spent from the kernel's start. */
void k_rma_clock(void *arg)
{
    rmapara_t *p = arg;
    char *b = ldm_malloc(RMA_CLOCK_BYTES);
    long t0, t;
    zero_replies();
    CRTS_ssync_array();
    t0 = (long)swemu_rtc();
    if (CRTS_tid == 0) {
        CRTS_rma_iput(b, &lr1, RMA_CLOCK_BYTES, 1, b, &rr1);
        CRTS_rma_wait_value(&lr1, 1);
    }
    if (CRTS_tid == 1) CRTS_rma_wait_value(&rr1, 1);
    t = (long)swemu_rtc() - t0;
    if (CRTS_tid < 2) {
        CRTS_dma_iput(p->res + CRTS_tid, &t, sizeof t, &dr);
        CRTS_dma_wait_value(&dr, 1);
    }
    CRTS_ssync_array();
    ldm_free(b, RMA_CLOCK_BYTES);
}
