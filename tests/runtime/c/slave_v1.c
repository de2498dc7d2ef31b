/* Slave side of the runtime test program, Athread v1 spelling (source first,
 * stride before bsize, `while (reply != n);`). */
#include <slave.h>
#include <dma.h>
#include <simd.h>
#include "prog.h"

#define CAP SWEMU_LDM_BYTES
#define LDMVAR __thread_local
typedef volatile int reply_t;
#define MYID athread_get_id(-1)
#define GET(l, m, len, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, 0, 0)
#define PUT(m, l, len, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), 0, 0)
#define GETS(l, m, len, bs, gap, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, (gap), (bs))
#define PUTS(m, l, len, bs, gap, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), (gap), (bs))
#define WAIT(rp, n) while (*(rp) != (n))
#define SEEN_WAIT(rp, n) swemu_reply_wait((rp), (n))   /* the wait generated v1 code uses */
#define SYNC_ALL() athread_syn(ARRAY_SCOPE, 0xffff)
#define SYNC_ROW() athread_syn(ROW_SCOPE, 0xff)
#define SYNC_COL() athread_syn(COL_SCOPE, 0xff)

/* the id macros must agree with athread_get_id */
#define CHECK_IDS() (_MYID == MYID && _ROW == MYID / 8 && _COL == MYID % 8)

static double vec_extra(int id)          /* 36 * id through doublev4 */
{
    doublev4 a = simd_set_doublev4(1, 2, 3, 4), b = simd_set_doublev4(5, 6, 7, 8);
    return simd_reduc_plusd(simd_vmuld(a + b, simd_set_doublev4(id, id, id, id)));
}

void k_wait(void *arg) { (void)arg; }

#include "slave_common.inc"

/* ---- BCAST_MODE (v1 only; slave_crts.c has empty stand-ins) ---- */

/* Per row r, CPE (r, r % 8) broadcasts 64 floats of in[] to its row (mask 1 << r; row 7's
 * mask 0x80 is a negative char) into an ldm_malloc'd buffer; odd rows broadcast strided
 * (32 B chunks, 32 B skipped).  Each CPE also gets one int by PE_MODE, then puts what it
 * received to out[64 id ...] and its own reply word to res[id] (1 on issuers, 0 else). */
void k_bcast_row(void *arg)
{
    para_t *p = arg;
    int id = _MYID, row = _ROW, scale = 0;
    float *buf = ldm_malloc(256);
    reply_t r = 0, w = 0;
    athread_get(PE_MODE, p->shared, &scale, 4, (void *)&w, 0, 0, 0);
    while (w != 1);
    athread_syn(ROW_SCOPE, 0xff);            /* every receiver has allocated */
    if (_COL == row % 8) {
        if (row % 2) athread_get(BCAST_MODE, p->in + 512 * row, buf, 256, (void *)&r, (char)(1 << row), 32, 32);
        else athread_get(BCAST_MODE, p->in + 512 * row, buf, 256, (void *)&r, (char)(1 << row), 0, 0);
        while (r != 1);
    }
    athread_syn(ROW_SCOPE, 0xff);
    athread_put(PE_MODE, buf, p->out + 64 * id, 256, (void *)&w, 0, 0);
    athread_put(PE_MODE, (void *)&r, p->res + id, 4, (void *)&w, 0, 0);
    while (w != 3);
    ldm_free(buf, 256);
}

/* The public pattern: CPE 0 broadcasts to all 64 CPEs (mask 0xff) into a local array, no
 * barrier before it.  Then CPE 5 (row 0) broadcasts into an LDM variable for rows 1..7
 * only (mask 0xfe: the issuer is not a receiver); row 0 keeps its own values. */
LDMVAR float tlb[16];

void k_bcast_all(void *arg)
{
    para_t *p = arg;
    int id = _MYID;
    float loc[64];
    reply_t r = 0;
    for (int i = 0; i < 16; i++) tlb[i] = -id;
    if (id == 0) {
        athread_get(BCAST_MODE, p->in + 1000, loc, 256, (void *)&r, 0xff, 0, 0);
        while (r != 1);
    }
    __asm__ volatile("" : : "r"(loc) : "memory");
    athread_syn(ARRAY_SCOPE, 0xffff);
    if (id == 5) {
        athread_get(BCAST_MODE, p->in + 2000, tlb, 64, (void *)&r, (char)0xfe, 0, 0);
        while (r != 1);
    }
    athread_syn(ARRAY_SCOPE, 0xffff);
    athread_put(PE_MODE, loc, p->out2 + 64 * id, 256, (void *)&r, 0, 0);
    athread_put(PE_MODE, tlb, p->out3 + 16 * id, 64, (void *)&r, 0, 0);
    while (r != (id == 0 || id == 5 ? 3 : 2));
}

/* CPE 13 allocates heap1 bytes (0: nothing) instead of 256, then CPE 0 broadcasts. */
void k_bcast_bad(void *arg)
{
    para_t *p = arg;
    float *buf = NULL;
    reply_t r = 0;
    if (_MYID != 13) buf = ldm_malloc(256);
    else if (p->heap1) buf = ldm_malloc(p->heap1);
    athread_syn(ARRAY_SCOPE, 0xffff);
    if (_MYID == 0) {
        athread_get(BCAST_MODE, p->in, buf, 256, (void *)&r, 0xff, 0, 0);
        while (r != 1);
    }
    athread_syn(ARRAY_SCOPE, 0xffff);
}

void k_bcast_mask0(void *arg)
{
    para_t *p = arg;
    float *buf = ldm_malloc(64);
    reply_t r = 0;
    athread_get(BCAST_MODE, p->in, buf, 64, (void *)&r, 0, 0, 0);
}

void k_row_mode(void *arg)              /* ROW_MODE stays unemulated */
{
    para_t *p = arg;
    float *buf = ldm_malloc(64);
    reply_t r = 0;
    athread_get(ROW_MODE, p->in, buf, 64, (void *)&r, 0xff, 0, 0);
}
