/* rma.c - RMA between the LDMs of a core group (SW26010-Pro, CRTS_rma_*).
 *
 * An RMA moves `len` bytes from one CPE's LDM to another's (iput, iget), or from the issuer's
 * LDM to every CPE of its row, its column or the array, itself included (row/col/array
 * ibcast, the CRTS "LOCAL_RECEIVE_DATA" forms). Addresses are LDM offsets on the chip, the
 * same in every CPE: here a pointer into the issuer's LDM (heap arena, or stack/static data)
 * names the same offset in the other CPE's. Two reply words: the one whose address the
 * issuer's own data side uses ("local": for a put the source was read, for a get the data
 * landed) and the remote one, at the same offset in each other CPE (for a put the data
 * landed there, for a get its source was read).
 *
 * Landing (the strictest point, whatever SWEMU_DMA says): the source is read at issue into a
 * staged copy, each destination is filled with 0xFF bytes at issue, and a destination lands
 * (staged data copied, its reply word + 1) only when its CPE waits on that reply word with
 * CRTS_rma_wait_value. The source is released (its reply + 1) when its CPE waits on that
 * word, or when every destination landed. Reported, as the chip would go wrong there: a
 * store into the source before its release (the staged copy differs), a store into a
 * destination before it landed (the fill changed), a load from it then sees 0xFF data; a
 * source or destination with DMA or another RMA in flight on it; ldm_free of such a buffer;
 * a destination outside the receiver's live LDM (not allocated there yet: nothing ordered the
 * receiver's ldm_malloc before the RMA); a CPE returning with RMA into or out of its LDM not
 * waited for; a wait no RMA can satisfy (every CPE waits or returned: regcomm.c's deadlock
 * check).
 *
 * A landing orders the issuer's accesses before the RMA before the receiver's after its
 * wait (race.c's vector clocks), as a register message does. Modelled clock (timing.c): the
 * issuer pays len / rma_bytes_per_cycle at issue, a broadcast what one message costs
 * (assumed, as for register communication); a destination lands rma_latency_cycles after
 * the issue ended. Counted per kernel at the issuer: operations per form, bytes read from
 * sources and bytes landed in destinations.
 */
#include "swemu_int.h"

#ifdef SWEMU_API_CRTS
#include "crts.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RMA_IPUT, RMA_IGET, RMA_ROW, RMA_COL, RMA_ARRAY };
#define RMA_MAX 1024                   /* transfers in flight in the core group */

typedef struct {
    int live, form, issuer;
    int src_cpe;                       /* whose LDM the data is read from */
    unsigned char *src;                /* CPE view of the source */
    volatile int *src_reply;           /* + 1 when the source is released (NULL: none) */
    int released;
    long len;
    unsigned char *stage;              /* the source's bytes at issue */
    int ndst, landed;
    int dst_cpe[SWEMU_CPES];
    unsigned char *dst[SWEMU_CPES];
    volatile int *dst_reply[SWEMU_CPES];
    unsigned char done[SWEMU_CPES];
    unsigned char filled[SWEMU_CPES];  /* 0xFF-filled at issue (not the issuer's own src == dst) */
    unsigned vc[SWEMU_CPES];           /* the issuer's clock after its new epoch */
    double t_end;                      /* the issuer's modelled clock after the issue */
} rma_xfer;

static rma_xfer xf[RMA_MAX];
static int nxf;                        /* slots used, live or not */
static const char *const form_name[] = {"CRTS_rma_iput", "CRTS_rma_iget", "CRTS_rma_row_ibcast",
                                        "CRTS_rma_col_ibcast", "CRTS_rma_ibcast"};

void swemu_rma_reset(void) { nxf = 0; }

/* Offset of p in c's LDM, *kind 0 the heap arena, 1 the stack/static data mapping; -1 outside. */
static long ldm_offset(const swemu_cpe *c, uintptr_t p, int *kind)
{
    if (p >= (uintptr_t)c->ldm && p < (uintptr_t)c->ldm + SWEMU_ARENA) { *kind = 0; return (long)(p - (uintptr_t)c->ldm); }
    if (p >= c->region_lo && p < c->region_lo + swemu_stk_region) { *kind = 1; return (long)(p - c->region_lo); }
    return -1;
}

static uintptr_t at_cpe(int d, int kind, long off)
{
    return (kind ? swemu_cpes[d].region_lo : (uintptr_t)swemu_cpes[d].ldm) + (uintptr_t)off;
}

/* The same LDM offset as the issuer's pointer p, in CPE d; [p, p + len) must be live there. */
static void *translate(swemu_cpe *c, const char *op, const char *what, const void *p, long len, int d)
{
    int kind = 0;
    long off = ldm_offset(c, (uintptr_t)p, &kind);
    uintptr_t q;
    if (off < 0)
        swemu_die(c, "%s: %s %p is not in this CPE's LDM (RMA addresses are LDM offsets)", op, what, p);
    q = at_cpe(d, kind, off);
    if (!swemu_in_ldm(&swemu_cpes[d], q, q + len))
        swemu_die(c, "%s: %s at LDM offset %#lx (%ld bytes) is not inside a live ldm_malloc block or "
                  "the stack/static data of CPE %d (not allocated there yet? nothing ordered its "
                  "ldm_malloc before the RMA)", op, what, off, len, d);
    return (void *)q;
}

static int overlap(const void *a, long na, const void *b, long nb)
{
    return (uintptr_t)a < (uintptr_t)b + nb && (uintptr_t)b < (uintptr_t)a + na;
}

/* No DMA of c in flight on [p, p + len) (the issuer's own queue: another CPE's is its thread's). */
static void no_dma_on(swemu_cpe *c, const char *op, const char *what, const void *p, long len)
{
    for (int i = 0; i < c->nq; i++)
        if (overlap(c->q[i].ldm, c->q[i].len, p, len) && (!c->q[i].put || what[0] == 'd'))
            swemu_die(c, "%s: %s %p..%p has DMA %s in flight on it (wait for its reply first)", op, what,
                      p, (void *)((char *)p + len), c->q[i].op);
}

/* With the lock held: no RMA in flight writes [p, p + len) of CPE cpe, and for a destination
 * none reads it either. */
static void no_rma_on(swemu_cpe *c, const char *op, const char *what, int cpe, const void *p, long len)
{
    for (int i = 0; i < nxf; i++) {
        rma_xfer *x = &xf[i];
        if (!x->live) continue;
        for (int j = 0; j < x->ndst; j++)
            if (!x->done[j] && x->dst_cpe[j] == cpe && overlap(x->dst[j], x->len, p, len))
                swemu_die(c, "%s: %s in CPE %d's LDM overlaps the destination of %s by CPE %d, still in "
                          "flight (its reply not waited for)", op, what, cpe, form_name[x->form], x->issuer);
        if (what[0] == 'd' && !x->released && x->src_cpe == cpe && overlap(x->src, x->len, p, len))
            swemu_die(c, "%s: destination in CPE %d's LDM overlaps the source of %s by CPE %d, still in "
                      "flight (its reply not waited for)", op, cpe, form_name[x->form], x->issuer);
    }
}

static void release(rma_xfer *x, swemu_cpe *by)   /* lock held */
{
    if (x->released) return;
    if (memcmp(swemu_em(x->src), x->stage, x->len))
        swemu_die(by, "%s by CPE %d: its source (%ld bytes in CPE %d's LDM at %p) was written while the "
                  "RMA was in flight (buffer reused before its reply wait)", form_name[x->form], x->issuer,
                  x->len, x->src_cpe, (void *)x->src);
    x->released = 1;
    if (x->src_reply) __atomic_add_fetch((int *)swemu_em((void *)x->src_reply), 1, __ATOMIC_SEQ_CST);
    swemu_mesh_moved(x->src_cpe);
}

static void retire(rma_xfer *x)
{
    if (!x->released || x->landed < x->ndst) return;
    free(x->stage);
    x->live = 0;
    while (nxf && !xf[nxf - 1].live) nxf--;
}

/* Destination j lands, in its CPE c's wait (lock held). */
static void land(rma_xfer *x, int j, swemu_cpe *c)
{
    unsigned char *d = swemu_em(x->dst[j]);
    if (x->filled[j])
        for (long i = 0; i < x->len; i++)
            if (d[i] != 0xFF)
                swemu_die(c, "%s by CPE %d: its destination at %p (%ld bytes) was written at byte %ld "
                          "before the RMA landed (missing or misplaced CRTS_rma_wait_value)",
                          form_name[x->form], x->issuer, (void *)x->dst[j], x->len, i);
    memcpy(d, x->stage, x->len);
    x->done[j] = 1;
    x->landed++;
    __atomic_add_fetch((int *)swemu_em((void *)x->dst_reply[j]), 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < SWEMU_CPES; i++)
        if (x->vc[i] > c->vc[i]) c->vc[i] = x->vc[i];
    swemu_clock_tick(c);               /* later accesses: a new epoch, after the issuer's RMA */
    if (x->t_end + swemu_rma_latency() > c->cycles) c->cycles = x->t_end + swemu_rma_latency();
    if (x->landed == x->ndst) release(x, c);   /* every destination has the data: the source was read */
}

/* One RMA: data from src (in CPE src_cpe) to dst[] of the CPEs dcpe[]; src_reply / dst_reply
 * are the reply words (CPE views), NULL for none. */
static void issue(swemu_cpe *c, int form, int src_cpe, void *src, volatile int *src_reply, long len,
                  int n, const int *dcpe, void **dst, volatile int **dst_reply)
{
    const char *op = form_name[form];
    rma_xfer *x = NULL;
    no_dma_on(c, op, "source", src_cpe == c->id ? src : NULL, src_cpe == c->id ? len : 0);
    for (int j = 0; j < n; j++)
        if (dcpe[j] == c->id) no_dma_on(c, op, "destination", dst[j], len);
    swemu_enter(c);
    swemu_mesh_lock();
    no_rma_on(c, op, "source", src_cpe, src, len);
    for (int j = 0; j < n; j++) {
        if (swemu_mesh_gone(dcpe[j]))
            swemu_die(c, "%s to CPE %d, which already returned from the kernel", op, dcpe[j]);
        no_rma_on(c, op, "destination", dcpe[j], dst[j], len);
    }
    for (int i = 0; i < RMA_MAX && !x; i++)
        if (!xf[i].live) x = &xf[i];
    if (!x)
        swemu_die(c, "%s: more than %d RMA transfers in flight in the core group", op, RMA_MAX);
    if (x - xf >= nxf) nxf = (int)(x - xf) + 1;
    memset(x, 0, sizeof *x);
    x->live = 1;
    x->form = form;
    x->issuer = c->id;
    x->src_cpe = src_cpe;
    x->src = src;
    x->src_reply = src_reply;
    x->len = len;
    if (!(x->stage = malloc(len))) swemu_die(c, "%s: out of memory", op);
    memcpy(x->stage, swemu_em(src), len);
    x->ndst = n;
    for (int j = 0; j < n; j++) {
        x->dst_cpe[j] = dcpe[j];
        x->dst[j] = dst[j];
        x->dst_reply[j] = dst_reply[j];
        x->filled[j] = !(dcpe[j] == src_cpe && dst[j] == src);   /* in place at the issuer: already there */
        if (x->filled[j]) memset(swemu_em(dst[j]), 0xFF, len);
    }
    swemu_clock_tick(c);               /* what came before is ordered before the landings */
    memcpy(x->vc, c->vc, sizeof x->vc);
    c->cycles += (double)len / swemu_rma_bytes_per_cycle();
    x->t_end = c->cycles;
    c->rma_ops[form]++;
    c->rma_bytes += len;
    c->rma_recv_bytes += (uint64_t)len * n;
    if (!src_reply) x->released = 1;
    for (int j = 0; j < n; j++) swemu_mesh_moved(dcpe[j]);
    swemu_mesh_moved(src_cpe);
    swemu_mesh_unlock();
    swemu_leave(c);
}

void swemu_rma_kernel_end(swemu_cpe *c)
{
    swemu_mesh_lock();
    for (int i = 0; i < nxf; i++) {
        rma_xfer *x = &xf[i];
        if (!x->live) continue;
        for (int j = 0; j < x->ndst; j++)
            if (!x->done[j] && x->dst_cpe[j] == c->id) {
                swemu_mesh_unlock();
                swemu_die(c, "returned from the kernel with %s by CPE %d into its LDM never waited for "
                          "(CRTS_rma_wait_value on its reply word)", form_name[x->form], x->issuer);
            }
        if (!x->released && x->src_cpe == c->id) {
            swemu_mesh_unlock();
            swemu_die(c, "returned from the kernel with %s by CPE %d still reading its LDM (%d of %d "
                      "destinations landed; wait for the source's reply word first)", form_name[x->form],
                      x->issuer, x->landed, x->ndst);
        }
    }
    swemu_mesh_unlock();
}

/* Without RMA in flight (every kernel that uses none) ldm_free takes no lock: the CPE's own
 * transfers are visible to it, another's into a block being freed is unordered anyway. */
void swemu_rma_check_free(swemu_cpe *c, uintptr_t lo, uintptr_t hi)
{
    if (!__atomic_load_n(&nxf, __ATOMIC_ACQUIRE)) return;
    swemu_mesh_lock();
    for (int i = 0; i < nxf; i++) {
        rma_xfer *x = &xf[i];
        int hit = x->live && !x->released && x->src_cpe == c->id && overlap(x->src, x->len, (void *)lo, (long)(hi - lo));
        for (int j = 0; x->live && j < x->ndst; j++)
            hit |= !x->done[j] && x->dst_cpe[j] == c->id && overlap(x->dst[j], x->len, (void *)lo, (long)(hi - lo));
        if (hit) {
            swemu_mesh_unlock();
            swemu_die(c, "ldm_free(%#lx): %s by CPE %d is still in flight in this block", (unsigned long)lo,
                      form_name[x->form], x->issuer);
        }
    }
    swemu_mesh_unlock();
}

#ifdef SWEMU_API_CRTS
static void check_len(swemu_cpe *c, const char *op, int len)
{
    if (len <= 0) swemu_die(c, "%s: length %d (must be positive)", op, len);
}

static void *own(swemu_cpe *c, const char *op, const char *what, const void *p, long len)
{
    if (!swemu_in_ldm(c, (uintptr_t)p, (uintptr_t)p + len))
        swemu_die(c, "%s: %s %p (%ld bytes) is not inside a live ldm_malloc block or the stack/static "
                  "data of this CPE's LDM", op, what, p, len);
    return (void *)p;
}

int CRTS_rma_iput(void *l_addr, crts_rply_t *l_rply, int len, int r_tid, void *r_addr, crts_rply_t *r_rply)
{
    const char *op = form_name[RMA_IPUT];
    swemu_cpe *c = swemu_need_cpe(op);
    void *dst;
    volatile int *rr;
    check_len(c, op, len);
    if (r_tid < 0 || r_tid >= SWEMU_CPES)
        swemu_die(c, "%s: CPE %d is not 0..%d", op, r_tid, SWEMU_CPES - 1);
    own(c, op, "source", l_addr, len);
    own(c, op, "local reply word", (void *)l_rply, sizeof *l_rply);
    dst = translate(c, op, "destination", r_addr, len, r_tid);
    rr = translate(c, op, "remote reply word", (void *)r_rply, sizeof *r_rply, r_tid);
    issue(c, RMA_IPUT, c->id, l_addr, l_rply, len, 1, &r_tid, &dst, &rr);
    return 0;
}

int CRTS_rma_iget(void *l_addr, crts_rply_t *l_rply, int len, int r_tid, void *r_addr, crts_rply_t *r_rply)
{
    const char *op = form_name[RMA_IGET];
    swemu_cpe *c = swemu_need_cpe(op);
    void *src, *dst = l_addr;
    volatile int *rr, *lr = l_rply;
    int me = c->id;
    check_len(c, op, len);
    if (r_tid < 0 || r_tid >= SWEMU_CPES)
        swemu_die(c, "%s: CPE %d is not 0..%d", op, r_tid, SWEMU_CPES - 1);
    own(c, op, "destination", l_addr, len);
    own(c, op, "local reply word", (void *)l_rply, sizeof *l_rply);
    src = translate(c, op, "source", r_addr, len, r_tid);
    rr = translate(c, op, "remote reply word", (void *)r_rply, sizeof *r_rply, r_tid);
    issue(c, RMA_IGET, r_tid, src, rr, len, 1, &me, &dst, &lr);
    return 0;
}

/* Row (form RMA_ROW), column or array broadcast from c's src to dst of every member, c included. */
static int bcast(int form, void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply)
{
    const char *op = form_name[form];
    swemu_cpe *c = swemu_need_cpe(op);
    int to[SWEMU_CPES], n = 0;
    void *d[SWEMU_CPES];
    volatile int *rr[SWEMU_CPES];
    check_len(c, op, len);
    own(c, op, "source", src, len);
    own(c, op, "local reply word", (void *)l_rply, sizeof *l_rply);
    for (int i = 0; i < SWEMU_CPES; i++)
        if (form == RMA_ARRAY || (form == RMA_ROW ? i / 8 == c->id / 8 : i % 8 == c->id % 8)) {
            to[n] = i;
            d[n] = translate(c, op, "destination", dst, len, i);
            rr[n++] = translate(c, op, "remote reply word", (void *)r_rply, sizeof *r_rply, i);
        }
    issue(c, form, c->id, src, l_rply, len, n, to, d, rr);
    return 0;
}

int CRTS_rma_row_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply)
{
    return bcast(RMA_ROW, dst, src, len, l_rply, r_rply);
}

int CRTS_rma_col_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply)
{
    return bcast(RMA_COL, dst, src, len, l_rply, r_rply);
}

int CRTS_rma_ibcast(void *dst, void *src, crts_rply_t *l_rply, int len, crts_rply_t *r_rply)
{
    return bcast(RMA_ARRAY, dst, src, len, l_rply, r_rply);
}

int CRTS_rma_wait_value(crts_rply_t *rply, int value)
{
    const char *op = "CRTS_rma_wait_value";
    swemu_cpe *c = swemu_need_cpe(op);
    int *w = swemu_em((void *)rply);
    unsigned long seen = 0;
    double since = 0;
    int spins = 0;
    own(c, op, "reply word", (void *)rply, sizeof *rply);
    swemu_enter(c);
    swemu_mesh_lock();
    for (;;) {
        for (int i = 0; i < nxf; i++) {
            rma_xfer *x = &xf[i];
            if (!x->live) continue;
            if (!x->released && x->src_cpe == c->id && x->src_reply == rply) {
                release(x, c);
                if (x->t_end > c->cycles) c->cycles = x->t_end;
            }
            for (int j = 0; j < x->ndst; j++)
                if (!x->done[j] && x->dst_cpe[j] == c->id && x->dst_reply[j] == rply) land(x, j, c);
            retire(x);
        }
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) >= value) break;
        swemu_mesh_wait(c, op, &seen, &since, &spins);   /* an RMA not issued yet; deadlock checked */
    }
    swemu_mesh_unlock();
    swemu_leave(c);
    return 0;
}
#endif

#ifndef SWEMU_RMA_LATENCY_CYCLES
#define SWEMU_RMA_LATENCY_CYCLES 110    /* toolchains/sunway-pro.toml rma_latency_cycles */
#endif
#ifndef SWEMU_RMA_BYTES_PER_CYCLE
#define SWEMU_RMA_BYTES_PER_CYCLE 24.5  /* toolchains/sunway-pro.toml rma_bytes_per_cycle */
#endif

double swemu_rma_latency(void) { return SWEMU_RMA_LATENCY_CYCLES; }

double swemu_rma_bytes_per_cycle(void) { return SWEMU_RMA_BYTES_PER_CYCLE; }
