/* Kernels of the fault suite, spelled for either API (see slave_v1.c / slave_crts.c). */
#include <slave.h>
#include <simd.h>
#include <stdint.h>
#include "faults.h"

#ifdef SWEMU_API_CRTS
#define CAP CRTS_MAX_LDM_SIZE
typedef crts_rply_t reply_t;
#define MYID CRTS_tid
#define GET(l, m, len, rp) CRTS_dma_iget((l), (m), (len), (rp))
#define PUT(m, l, len, rp) CRTS_dma_iput((m), (l), (len), (rp))
#define WAIT(rp, n) CRTS_dma_wait_value((rp), (n))
#define SYNC() CRTS_ssync_array()
#define ROWSYNC() CRTS_ssync_row()
#define COLSYNC() CRTS_ssync_col()
#else
#define CAP SWEMU_LDM_BYTES
typedef volatile int reply_t;
#define MYID athread_get_id(-1)
#define GET(l, m, len, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, 0, 0)
#define PUT(m, l, len, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), 0, 0)
#define WAIT(rp, n) swemu_reply_wait((rp), (n))
#define SYNC() athread_syn(ARRAY_SCOPE, 0xffff)
#define ROWSYNC() athread_syn(ROW_SCOPE, 0xff)
#define COLSYNC() athread_syn(COL_SCOPE, 0xff)
#endif
#define SINK(x) __asm__ volatile("" : : "r"(x) : "memory")

/* Double-buffered and correct: in[64 i ..] * 2 -> out[64 i ..], one CPE per block. */
void k_clean(void *arg)
{
    fpara_t *p = arg;
    float *b[2] = {ldm_malloc(256), ldm_malloc(256)};
    reply_t rg[2] = {0, 0}, rp = 0;
    int id = MYID;
    GET(b[0], p->in + 64 * id, 256, &rg[0]);
    GET(b[1], p->in + 64 * ((id + 1) % 64), 256, &rg[1]);
    WAIT(&rg[0], 1);
    for (int i = 0; i < 64; i++) b[0][i] *= 2;
    PUT(p->out + 64 * id, b[0], 256, &rp);
    WAIT(&rg[1], 1);
    WAIT(&rp, 1);
    ldm_free(b[1], 256);
    ldm_free(b[0], 256);
}

void k_read_early(void *arg)             /* reads the destination before the wait */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256), x;
    reply_t r = 0;
    GET(b, p->in, 256, &r);
    x = b[3];
    SINK(x);
    WAIT(&r, 1);
}

void k_reuse(void *arg)                  /* second get into a buffer still in flight */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    GET(b, p->in, 256, &r);
    GET(b, p->in + 64, 256, &r);
    WAIT(&r, 2);
}

void k_put_src(void *arg)                /* overwrites a put's source before the wait */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    for (int i = 0; i < 64; i++) b[i] = 0;
    PUT(p->out + 64 * MYID, b, 256, &r);
    b[5] = 1;
    WAIT(&r, 1);
}

void k_no_wait(void *arg)                /* never waits for its reply */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    GET(b, p->in, 256, &r);
}

void k_stack_early(void *arg)            /* writes a stack destination in flight */
{
    fpara_t *p = arg;
    float loc[64];
    reply_t r = 0;
    GET(loc, p->in, 256, &r);
    loc[7] = 1;
    SINK(loc);
    WAIT(&r, 1);
}

static __attribute__((noinline)) void uses_stack(float *dst, long n)
{
    volatile float big[CAP / 2 / sizeof(float)];   /* half the LDM on the stack */
    for (long i = 0; i < n; i++) big[i * 1024] = (float)i;
    dst[0] = big[0];
}

void k_heap_stack(void *arg)             /* 3/4 of the LDM on the heap, then 1/2 on the stack */
{
    float *b = ldm_malloc(CAP / 4 * 3);
    (void)arg;
    uses_stack(b, CAP / 2 / 4096);
}

void k_past_block(void *arg)             /* 8 KB past the end of a 64-byte block */
{
    float *b = ldm_malloc(64);
    (void)arg;
    ((volatile float *)b)[2048] = 1;
}

void k_past_ldm(void *arg)               /* past the end of the LDM itself */
{
    char *b = ldm_malloc(CAP / 2);          /* the first block starts the arena */
    (void)arg;
    ((volatile char *)b)[CAP] = 1;
}

void k_other_ldm(void *arg)              /* CPE 1 stores into CPE 0's LDM through main memory */
{
    fpara_t *p = arg;
    char *b = ldm_malloc(64);
    if (MYID == 0) p->ptrs[0] = b + 8192;
    SYNC();
    if (MYID == 1) *(volatile char *)p->ptrs[0] = 1;
    SYNC();
}

void k_len3(void *arg)
{
    fpara_t *p = arg;
    char *b = ldm_malloc(64);
    reply_t r = 0;
    GET(b, p->in, 3, &r);
    WAIT(&r, 1);
}

void k_mem_off1(void *arg)
{
    fpara_t *p = arg;
    char *b = ldm_malloc(64);
    reply_t r = 0;
    GET(b, (char *)p->in + 1, 16, &r);
    WAIT(&r, 1);
}

void k_ldm_off1(void *arg)
{
    fpara_t *p = arg;
    char *b = ldm_malloc(64);
    reply_t r = 0;
    GET(b + 1, p->in, 16, &r);
    WAIT(&r, 1);
}

void k_stack_overrun(void *arg)          /* 4 KB into a float[16] */
{
    fpara_t *p = arg;
    float loc[16];
    reply_t r = 0;
    GET(loc, p->in, 4096, &r);
    WAIT(&r, 1);
    SINK(loc);
}

void k_vec_misalign(void *arg)
{
    float *b = ldm_malloc(64);
    floatv4 v;
    (void)arg;
    for (int i = 0; i < 16; i++) b[i] = i;
    SINK(b);
    v = *(floatv4 *)(b + 1);
    v = v * v;
    *(floatv4 *)b = v;
}

void k_wait_past(void *arg)              /* waits for 3 replies of 2 transfers */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(64);
    reply_t r = 0;
    GET(b, p->in, 32, &r);
    GET(b + 8, p->in + 8, 32, &r);
    WAIT(&r, 3);
}

void k_free_in_flight(void *arg)
{
    fpara_t *p = arg;
    float *b = ldm_malloc(64);
    reply_t r = 0;
    GET(b, p->in, 64, &r);
    ldm_free(b, 64);
    WAIT(&r, 1);
}

void k_put_then_get(void *arg)           /* reads back what a put in flight writes */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256), *c = ldm_malloc(256);
    reply_t r = 0;
    for (int i = 0; i < 64; i++) b[i] = i;
    PUT(p->out + 64 * MYID, b, 256, &r);
    GET(c, p->out + 64 * MYID, 256, &r);
    WAIT(&r, 2);
}

/* Each CPE writes its block of out, then reads its neighbour's: a race without the
 * barrier (k_race), none with it (k_race_ok). */
static void neighbour(fpara_t *p, int sync)
{
    float *b = ldm_malloc(256), *c = ldm_malloc(256);
    reply_t r = 0;
    int id = MYID;
    GET(b, p->in + 64 * id, 256, &r);
    WAIT(&r, 1);
    for (int i = 0; i < 64; i++) b[i] *= 2;
    PUT(p->out + 64 * id, b, 256, &r);
    WAIT(&r, 2);
    if (sync) SYNC();
    GET(c, p->out + 64 * ((id + 1) % 64), 256, &r);
    WAIT(&r, 3);
}

void k_race(void *arg) { neighbour(arg, 0); }
void k_race_ok(void *arg) { neighbour(arg, 1); }

/* CPE i reads what CPE i + 9 (next row, next column) wrote: a row barrier, then a column
 * barrier orders it (through CPE i + 8); a row barrier alone does not */
static void diagonal(fpara_t *p, int col)
{
    float *b = ldm_malloc(256), *c = ldm_malloc(256);
    reply_t r = 0;
    int id = MYID;
    GET(b, p->in + 64 * id, 256, &r);
    WAIT(&r, 1);
    for (int i = 0; i < 64; i++) b[i] *= 2;
    PUT(p->out + 64 * id, b, 256, &r);
    WAIT(&r, 2);
    ROWSYNC();
    if (col) COLSYNC();
    GET(c, p->out + 64 * ((id + 9) % 64), 256, &r);
    WAIT(&r, 3);
}

void k_race_chain(void *arg) { diagonal(arg, 1); }
void k_race_row(void *arg) { diagonal(arg, 0); }

void k_wild_mem(void *arg)               /* main-memory side outside every array */
{
    float *b = ldm_malloc(64);
    reply_t r = 0;
    (void)arg;
    GET(b, (float *)(uintptr_t)0x10000, 64, &r);
    WAIT(&r, 1);
}

void k_global_past(void *arg)            /* reads 128 bytes past an unregistered static array */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    if (MYID == 0) {
        GET(b, p->unreg + 32, 256, &r);
        WAIT(&r, 1);
    }
    ldm_free(b, 256);
}

void k_heap_past(void *arg)              /* reads 128 bytes past an unregistered malloc block */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    if (MYID == 0) {
        GET(b, p->heap + 32, 256, &r);
        WAIT(&r, 1);
    }
    ldm_free(b, 256);
}

/* ---- plain stores: caught in every build but SWEMU_INSTRUMENT=0; plain loads: SWEMU_INSTRUMENT=1 ---- */
void k_plain_other(void *arg)            /* CPE 1 stores into CPE 0's live block */
{
    fpara_t *p = arg;
    char *b = ldm_malloc(64);
    if (MYID == 0) p->ptrs[0] = b;
    SYNC();
    if (MYID == 1) *(volatile char *)p->ptrs[0] = 1;
    SYNC();
}

void k_plain_other_stack(void *arg)      /* CPE 1 stores into CPE 0's local array */
{
    fpara_t *p = arg;
    volatile char loc[64];
    loc[0] = 0;
    if (MYID == 0) p->ptrs[0] = (void *)loc;
    SYNC();
    if (MYID == 1) *(volatile char *)p->ptrs[0] = 1;
    SYNC();
}

void k_plain_past(void *arg)             /* 16 bytes past a 64-byte block, same page */
{
    float *b = ldm_malloc(64);
    (void)arg;
    ((volatile float *)b)[20] = 1;
}

void k_direct_same_word(void *arg)       /* every CPE stores to out[0] directly */
{
    fpara_t *p = arg;
    ((volatile float *)p->out)[0] = (float)MYID;
}

void k_direct_ok(void *arg)              /* clean: own word, a barrier, then the neighbour's */
{
    fpara_t *p = arg;
    volatile float *o = p->out;
    float x;
    int id = MYID;
    o[id] = 2 * p->in[id];
    SYNC();
    x = o[(id + 1) % 64];
    SINK(x);
}

void k_load_past(void *arg)              /* a load 16 bytes past a 64-byte block */
{
    float *b = ldm_malloc(64), x;
    (void)arg;
    for (int i = 0; i < 16; i++) b[i] = i;
    x = ((volatile float *)b)[20];
    SINK(x);
    ldm_free(b, 64);
}

void k_direct_race(void *arg)            /* direct store, then the neighbour's word, no barrier */
{
    fpara_t *p = arg;
    volatile float *o = p->out;
    float x;
    o[MYID] = 2 * p->in[MYID];
    x = o[(MYID + 1) % 64];
    SINK(x);
}

/* Redzones (default builds): stores past a block on the same page, found at ldm_free, at a
 * DMA call, at a barrier; a kernel using exactly the whole LDM heap stays silent. */
void k_rz_free(void *arg)                /* 4 bytes past a 128-byte block */
{
    char *b = ldm_malloc(128), *d = ldm_malloc(64);
    (void)arg;
    ((volatile char *)b)[132] = 7;
    ldm_free(d, 64);
    ldm_free(b, 128);
}

void k_rz_dma(void *arg)                 /* the first byte past a block, then a DMA */
{
    fpara_t *p = arg;
    float *b = ldm_malloc(64);
    reply_t r = 0;
    ((volatile char *)b)[64] = 0;
    GET(b, p->in, 64, &r);
    WAIT(&r, 1);
    ldm_free(b, 64);
}

void k_rz_sync(void *arg)                /* 8 bytes past a block, then a barrier */
{
    float *b = ldm_malloc(64);
    (void)arg;
    ((volatile float *)b)[17] = 1;
    SYNC();
    ldm_free(b, 64);
}

int CRTS_pldm_get_free_size(void);
void k_rz_exact(void *arg)               /* clean: two blocks filling all but 6 KB (emulator frames) of free LDM */
{
    fpara_t *p = arg;
    long f = CRTS_pldm_get_free_size() - 6144, q[2] = {f / 2 / 64 * 64, 0};
    char *b[2];
    reply_t r = 0;
    q[1] = (f - q[0]) / 64 * 64;
    for (int i = 0; i < 2; i++) b[i] = ldm_malloc(q[i]);
    for (int i = 0; i < 2; i++) {
        for (long k = 0; k < q[i]; k++) b[i][k] = (char)k;
        GET(b[i] + q[i] - 256, p->in + 64 * (MYID % 8), 256, &r);
        WAIT(&r, i + 1);
        SINK(b[i][q[i] - 1]);
    }
    SYNC();
    for (int i = 1; i >= 0; i--) ldm_free(b[i], q[i]);
}
