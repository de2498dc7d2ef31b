/* dma.c - DMA for both APIs (v1 athread_get/put, CRTS_dma_*), checks, counters and the
 * write-conflict detector.
 *
 * With SWEMU_DMA=issue every transfer completes inside the call, then adds 1 to the reply
 * word atomically; in the other modes async.c queues it until it lands (a BCAST_MODE get
 * always lands inside the call).  Strided transfers follow
 * the hardware: `bsize` bytes contiguous in main memory, then `stride` bytes skipped (a
 * gap, not a pitch); the LDM side is contiguous; bsize == 0 or stride == 0 = contiguous.
 * v1 BCAST_MODE gets (one issuer, the same LDM address in every CPE of the masked rows)
 * are in bcast_get.
 */
#include "swemu_int.h"
#include "dma.h"
#include "crts.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_ldm(swemu_cpe *c, const char *op, const char *what, uintptr_t lo, uintptr_t hi)
{
    char where[96];
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (lo >= c->stk_lo && lo < c->entry_sp && hi > c->entry_sp)
        swemu_die(c, "%s: %s %#lx..%#lx starts in a local array on the LDM stack and runs %lu "
                  "bytes past the kernel's frames (longer than the array?)", op, what,
                  (unsigned long)lo, (unsigned long)hi, (unsigned long)(hi - c->entry_sp));
    if (lo >= c->stk_lo && lo < sp)
        swemu_die(c, "%s: %s %#lx..%#lx is below the stack pointer: not a live local array",
                  op, what, (unsigned long)lo, (unsigned long)hi);
    if (swemu_in_ldm(c, lo, hi)) return;
    if (lo >= (uintptr_t)c->ldm && hi <= (uintptr_t)c->ldm + SWEMU_ARENA)
        snprintf(where, sizeof where, "in this CPE's LDM heap but not inside one live ldm_malloc block");
    else
        swemu_where(lo, where, sizeof where);
    swemu_die(c, "%s: %s %#lx..%#lx is %s, not in this CPE's LDM", op, what,
              (unsigned long)lo, (unsigned long)hi, where);
}

/* Checks shared by every transfer: sizes, the main-memory side, the calling CPE's LDM side
 * and reply word.  Returns the number of chunks; *chunk and *gap describe them. */
static long dma_check(swemu_cpe *c, const char *op, void *mem, void *ldm, long len, long bsize,
                      long stride, volatile int *reply, long *chunk, long *gap)
{
    uintptr_t mlo = (uintptr_t)mem, mhi, llo = (uintptr_t)ldm;
    long n = 1;
    *chunk = len;
    *gap = 0;
    if (len <= 0) swemu_die(c, "%s: len %ld must be positive", op, len);
    if (bsize < 0 || stride < 0)
        swemu_die(c, "%s: negative bsize %ld or stride %ld", op, bsize, stride);
    if (bsize > 0 && stride > 0) {
        if (len % bsize)
            swemu_die(c, "%s: len %ld is not a multiple of bsize %ld", op, len, bsize);
        *chunk = bsize;
        *gap = stride;
        n = len / bsize;
    }
    mhi = mlo + n * *chunk + (n - 1) * *gap;
    if (!mem) swemu_die(c, "%s: main-memory address is NULL", op);
    /* toolchain rule dma_align_bytes: both addresses, the length and strided sizes */
    if (SWEMU_DMA_ALIGN > 1) {
        const char *bad = len % SWEMU_DMA_ALIGN ? "len" : mlo % SWEMU_DMA_ALIGN ? "main-memory address"
                        : llo % SWEMU_DMA_ALIGN ? "LDM address" : n > 1 && *chunk % SWEMU_DMA_ALIGN ? "bsize"
                        : n > 1 && *gap % SWEMU_DMA_ALIGN ? "stride" : NULL;
        if (bad)
            swemu_die(c, "%s: %s is not a multiple of dma_align_bytes = %d (len %ld, main memory "
                      "%#lx, LDM %#lx, bsize %ld, stride %ld)", op, bad, SWEMU_DMA_ALIGN, len,
                      (unsigned long)mlo, (unsigned long)llo, bsize, stride);
    }
    if ((mlo < swemu_ldm_hi && mhi > swemu_ldm_lo) || (mlo < swemu_stk_hi && mhi > swemu_stk_lo)) {
        char where[96];
        uintptr_t at = mlo;
        if (!((mlo >= swemu_ldm_lo && mlo < swemu_ldm_hi) || (mlo >= swemu_stk_lo && mlo < swemu_stk_hi)))
            at = (mhi > swemu_ldm_lo && mlo < swemu_ldm_hi) ? swemu_ldm_lo : swemu_stk_lo;
        swemu_where(at, where, sizeof where);
        swemu_die(c, "%s: main-memory side %#lx..%#lx is %s, not main memory (source and "
                  "destination swapped?)", op, (unsigned long)mlo, (unsigned long)mhi, where);
    }
    swemu_check_object(c, op, mlo, mhi);
    check_ldm(c, op, "LDM side", llo, llo + len);
    if (reply) check_ldm(c, op, "reply word", (uintptr_t)reply, (uintptr_t)reply + sizeof *reply);
    return n;
}

/* One more op of `len` bytes on c's counters. */
static void dma_count(swemu_cpe *c, int put, long len)
{
    int b;
    if (put) { c->put_ops++; c->put_bytes += len; }
    else { c->get_ops++; c->get_bytes += len; }
    b = 63 - __builtin_clzl((unsigned long)len);
    c->hist[b < SWEMU_HIST ? b : SWEMU_HIST - 1]++;
}

/* Checks, counts, then lands the transfer now (SWEMU_DMA=issue) or queues it (async.c). */
int swemu_dma(const char *op, int put, void *mem, void *ldm, long len, long bsize, long stride,
              volatile int *reply)
{
    swemu_cpe *c = swemu_need_cpe(op);
    long chunk, gap, n;
    swemu_enter(c);          /* cleared by swemu_issue / below */
    swemu_redzones(c, op, 8);   /* the first word: where an off-by-one store lands */
    n = dma_check(c, op, mem, ldm, len, bsize, stride, reply, &chunk, &gap);
    dma_count(c, put, len);
    swemu_time_dma(c, len, chunk, 1);
    if (swemu_dma_mode) {
        swemu_xfer x = {op, put, 0, mem, ldm, len, chunk, gap, n, reply, -1};
        swemu_issue(c, &x);
        return 0;
    }
    c->copying = op;
    for (long k = 0; k < n; k++) {
        char *m = (char *)mem + k * (chunk + gap), *l = swemu_em((char *)ldm + k * chunk);
        if (put) {
            memcpy(m, l, chunk);
            if (swemu_conflicts_on) swemu_record_write(c, (uintptr_t)m, (uintptr_t)m + chunk);
        } else {
            memcpy(l, m, chunk);
            if (swemu_conflicts_on) swemu_record_read(c, (uintptr_t)m, (uintptr_t)m + chunk);
        }
    }
    c->copying = NULL;
    if (reply) __atomic_fetch_add((int *)swemu_em((void *)reply), 1, __ATOMIC_SEQ_CST);
    swemu_leave(c);
    return 0;
}

/* ---- Athread v1 BCAST_MODE get: one CPE reads main memory once; the data lands at the
 * same LDM address in every CPE of the rows selected by `mask` (bit r = row r).
 *
 * "Same address" is mapped per receiver: a destination in the issuer's ldm_malloc arena
 * goes to the same offset of the receiver's arena; one in the issuer's stack/TLS part goes
 * to the same distance below the top of the receiver's stack mapping (TLS and frames of
 * equal call depth sit there).  Every receiver's range must be in its LDM (a live
 * ldm_malloc block or its stack/TLS) - checked for all before anything is copied.
 *
 * Receivers are other running threads: their block lists are read without locking (see
 * swemu_in_ldm), which is sound for the usual code - every CPE allocates, a barrier,
 * then the broadcast.  A stack/TLS destination is only written once the receiver has
 * entered the kernel (until then its thread waits in emulator frames that may lie at that
 * address); a receiver that already returned from the kernel is an error.  A receiver that
 * returns *during* the copy cannot be told apart - on the chip its data would be lost too.
 * Only the issuer's reply word and counters change: one get op of `len` bytes. */
static int bcast_get(swemu_cpe *c, void *src, void *dest, long len, void *reply, unsigned mask,
                     long stride, long bsize)
{
    const char *op = "athread_get";
    char *to[SWEMU_CPES];
    uintptr_t d = (uintptr_t)dest, off;
    long chunk, gap, n, nt = 0;
    int rows = SWEMU_CPES / 8, stack;
    swemu_enter(c);
    n = dma_check(c, op, src, dest, len, bsize, stride, reply, &chunk, &gap);
    if (!(mask & 0xffu))
        swemu_die(c, "%s: BCAST_MODE mask is 0: no row would receive the data", op);
    if (rows < 8 && !(mask & ((1u << rows) - 1)))    /* only with SWEMU_CPES < 64 */
        swemu_die(c, "%s: BCAST_MODE mask 0x%x selects no row (there are %d)", op,
                  mask & 0xffu, rows);
    /* dma_check put [d, d + len) inside the issuer's stack/TLS or one of its blocks */
    stack = d >= c->stk_lo && d + len <= c->stk_hi;
    off = stack ? c->stk_hi - d : d - (uintptr_t)c->ldm;
    for (int r = 0; r < rows; r++) {
        if (!(mask & (1u << r))) continue;
        for (int j = 0; j < 8; j++) {
            swemu_cpe *t = &swemu_cpes[r * 8 + j];
            uintptr_t a = stack ? t->stk_hi - off : (uintptr_t)t->ldm + off;
            if (t != c) {
                int st;
                while ((st = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE)) == 0 && stack)
                    sched_yield();          /* not yet in the kernel: wait, see above */
                if (st == 3)
                    swemu_die(c, "%s: BCAST_MODE receiving CPE %d already returned from the "
                              "kernel (its data would be lost)", op, t->id);
            }
            if (stack && !(a >= t->stk_lo && a + len <= t->stk_hi))
                swemu_die(c, "%s: BCAST_MODE destination %#lx..%#lx is outside the LDM "
                          "stack/static data of receiving CPE %d (broadcast from a deeper call "
                          "than the receivers?)", op, (unsigned long)a, (unsigned long)(a + len), t->id);
            if (!stack && !swemu_in_ldm(t, a, a + len))
                swemu_die(c, "%s: BCAST_MODE destination %#lx..%#lx is not inside a live LDM "
                          "block of receiving CPE %d (every receiver must have allocated the same "
                          "buffer)", op, (unsigned long)a, (unsigned long)(a + len), t->id);
            to[nt++] = (char *)a;
        }
    }
    /* main memory is read once, into the first receiver; the others copy LDM to LDM.
     * A broadcast lands inside the call in every SWEMU_DMA mode. */
    c->copying = op;
    for (long k = 0; k < n; k++) {
        char *m = (char *)src + k * (chunk + gap);
        memcpy((char *)swemu_em(to[0]) + k * chunk, m, chunk);
        if (swemu_conflicts_on) swemu_record_read(c, (uintptr_t)m, (uintptr_t)m + chunk);
    }
    for (long i = 1; i < nt; i++) memcpy(swemu_em(to[i]), swemu_em(to[0]), len);
    c->copying = NULL;
    dma_count(c, 0, len);
    swemu_time_dma(c, len, chunk, (int)nt);
    if (reply) __atomic_fetch_add((int *)swemu_em(reply), 1, __ATOMIC_SEQ_CST);
    swemu_leave(c);
    return 0;
}

/* ---- Athread v1: source first, stride before bsize ---- */
static const char *mode_name(int m)
{
    static const char *names[] = {"PE_MODE", "BCAST_MODE", "ROW_MODE", "BROW_MODE", "RANK_MODE"};
    return m >= 0 && m < 5 ? names[m] : "unknown mode";
}

int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask, int stride,
                int bsize)
{
    if (mode == BCAST_MODE)
        return bcast_get(swemu_need_cpe("athread_get"), src, dest, len, reply,
                         (unsigned char)mask, stride, bsize);
    if (mode != PE_MODE)
        swemu_die(swemu_need_cpe("athread_get"), "athread_get: %s is not emulated (only PE_MODE "
                  "and BCAST_MODE)", mode_name(mode));
    return swemu_dma("athread_get", 0, src, dest, len, bsize, stride, reply);
}

int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride, int bsize)
{
    if (mode != PE_MODE)
        swemu_die(swemu_need_cpe("athread_put"), "athread_put: %s is not emulated (only PE_MODE)",
                  mode_name(mode));
    return swemu_dma("athread_put", 1, dest, src, len, bsize, stride, reply);
}

/* ---- CRTS: destination first, bsize before stride ---- */
int CRTS_dma_iget(void *dest, void *src, int len, crts_rply_t *reply)
{ return swemu_dma("CRTS_dma_iget", 0, src, dest, len, 0, 0, reply); }
int CRTS_dma_iput(void *dest, void *src, int len, crts_rply_t *reply)
{ return swemu_dma("CRTS_dma_iput", 1, dest, src, len, 0, 0, reply); }
int CRTS_dma_iget_stride(void *dest, void *src, int len, int bsize, int stride, crts_rply_t *reply)
{ return swemu_dma("CRTS_dma_iget_stride", 0, src, dest, len, bsize, stride, reply); }
int CRTS_dma_iput_stride(void *dest, void *src, int len, int bsize, int stride, crts_rply_t *reply)
{ return swemu_dma("CRTS_dma_iput_stride", 1, dest, src, len, bsize, stride, reply); }
int CRTS_dma_get(void *dest, void *src, int len)
{ return swemu_dma("CRTS_dma_get", 0, src, dest, len, 0, 0, NULL); }
int CRTS_dma_put(void *dest, void *src, int len)
{ return swemu_dma("CRTS_dma_put", 1, dest, src, len, 0, 0, NULL); }
int CRTS_dma_get_stride(void *dest, void *src, int len, int bsize, int stride)
{ return swemu_dma("CRTS_dma_get_stride", 0, src, dest, len, bsize, stride, NULL); }
int CRTS_dma_put_stride(void *dest, void *src, int len, int bsize, int stride)
{ return swemu_dma("CRTS_dma_put_stride", 1, dest, src, len, bsize, stride, NULL); }

int CRTS_dma_wait_value(crts_rply_t *reply, int value)
{
    swemu_cpe *c = swemu_need_cpe("CRTS_dma_wait_value");
    check_ldm(c, "CRTS_dma_wait_value", "reply word", (uintptr_t)reply, (uintptr_t)reply + sizeof *reply);
    swemu_wait_reply("CRTS_dma_wait_value", reply, value, 0);
    return 0;
}

