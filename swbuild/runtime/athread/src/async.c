/* async.c - asynchronous DMA and the LDM page protection that makes its misuse visible.
 *
 * SWEMU_DMA selects when a transfer lands (data copied, reply word + 1):
 *   issue          inside the call (the chip's best case; nothing in flight)
 *   wait           at the matching wait: CRTS_dma_wait_value, swemu_reply_wait (generated
 *                  v1 code), or - for a hand-written `while (reply != n);` the emulator
 *                  cannot see - when the CPE has spun SWEMU_SPIN_US (2000) µs of CPU time
 *   random[:SEED]  at issue, after a seeded number of the CPE's later DMA calls, or at wait
 * A get's LDM destination is unreadable while in flight, a put's LDM source unwritable:
 * their arena pages are protected (stack/TLS destinations are filled with 0xFF bytes and
 * checked when the get lands).  A fault on such a page inside the transfer's bytes is the
 * bug, reported; one elsewhere on the page lands the page's transfers early (allowed: a
 * transfer may land any time before its wait) and resumes.  The emulator itself reads and
 * writes arenas through swemu_alias, a second mapping that is never protected.
 */
#include "swemu_int.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

int swemu_dma_mode = 1;
int swemu_checks = 1;
char *swemu_alias;
static unsigned seed;
static long spin_ns = 2000000;

/* ---- describing addresses and transfers ---- */
static int in_arena(swemu_cpe *c, uintptr_t a)
{
    return a >= (uintptr_t)c->ldm && a < (uintptr_t)c->ldm + SWEMU_ARENA;
}

void swemu_describe_ldm(swemu_cpe *c, uintptr_t a, char *buf, size_t n)
{
    if (in_arena(c, a)) {
        size_t off = a - (uintptr_t)c->ldm;
        int below = -1;
        for (int i = 0; i < c->nblk; i++) {
            if (off >= c->blk[i].off && off < c->blk[i].off + c->blk[i].size) {
                snprintf(buf, n, "ldm_malloc block %#lx of %zu bytes, byte %zu",
                         (unsigned long)((uintptr_t)c->ldm + c->blk[i].off), c->blk[i].req,
                         off - c->blk[i].off);
                return;
            }
            if (c->blk[i].off <= off) below = i;
        }
        if (below >= 0)
            snprintf(buf, n, "%zu bytes past the end of ldm_malloc block %#lx of %zu bytes",
                     off - (c->blk[below].off + c->blk[below].req),
                     (unsigned long)((uintptr_t)c->ldm + c->blk[below].off), c->blk[below].req);
        else
            snprintf(buf, n, "outside every live ldm_malloc block");
    } else if (a >= c->stk_lo && a < c->stk_hi) {
        snprintf(buf, n, a >= c->entry_sp ? "__thread_local data" : "a local array on the LDM stack");
    } else {
        swemu_where(a, buf, n);
    }
}

static void describe_xfer(swemu_cpe *c, const swemu_xfer *x, char *buf, size_t n)
{
    uintptr_t m = (uintptr_t)x->mem, mh = m + x->n * x->chunk + (x->n - 1) * x->gap;
    char lw[128];
    swemu_describe_ldm(c, (uintptr_t)x->ldm, lw, sizeof lw);
    snprintf(buf, n, "%s #%u (%ld bytes, main memory %#lx..%#lx %s LDM %#lx in %s)", x->op,
             x->seq, x->len, (unsigned long)m, (unsigned long)mh, x->put ? "<-" : "->",
             (unsigned long)(uintptr_t)x->ldm, lw);
}

/* ---- page protection of the caller's arena ---- */
static size_t page_of(swemu_cpe *c, uintptr_t a) { return (a - (uintptr_t)c->ldm) / SWEMU_PAGE; }

void swemu_reprotect(swemu_cpe *c, size_t p0, size_t p1)
{
    size_t run = p0;
    int want_run = -1;
    for (size_t p = p0; p <= p1; p++) {
        int want = -1;
        if (p < p1) {
            want = PROT_READ | PROT_WRITE;
            if (p >= c->top_pages || c->pg_get[p]) want = PROT_NONE;
            else if (c->pg_put[p]) want = PROT_READ;
            if (want == c->pg_prot[p]) want = -1;
        }
        if (want != want_run) {
            if (want_run >= 0 &&
                mprotect(c->ldm + run * SWEMU_PAGE, (p - run) * SWEMU_PAGE, want_run))
                swemu_die(c, "mprotect of the LDM failed: %s", strerror(errno));
            for (size_t k = run; want_run >= 0 && k < p; k++) c->pg_prot[k] = (unsigned char)want_run;
            run = p;
            want_run = want;
        }
    }
}

/* Count x's pages in (d = +1) or out (-1).  Pages counted out are only reprotected by
 * flush(), so that a wait landing several transfers makes one mprotect call. */
static __thread size_t d_lo = SIZE_MAX, d_hi;

static void flush(swemu_cpe *c)
{
    if (d_lo < d_hi) swemu_reprotect(c, d_lo, d_hi);
    d_lo = SIZE_MAX;
    d_hi = 0;
}

static void track(swemu_cpe *c, const swemu_xfer *x, int d)
{
    uintptr_t lo = (uintptr_t)x->ldm;
    size_t p0, p1;
    if (!x->prot) return;
    p0 = page_of(c, lo);
    p1 = page_of(c, lo + x->len - 1) + 1;
    for (size_t p = p0; p < p1; p++) {
        if (x->put) c->pg_put[p] += d;
        else c->pg_get[p] += d;
    }
    if (d > 0) {
        swemu_reprotect(c, p0, p1);
    } else {
        if (p0 < d_lo) d_lo = p0;
        if (p1 > d_hi) d_hi = p1;
    }
}

/* ---- landing ---- */
static void land(swemu_cpe *c, int i)
{
    swemu_xfer x = c->q[i];
    char *l = swemu_em(x.ldm);
    memmove(&c->q[i], &c->q[i + 1], (c->nq - i - 1) * sizeof *c->q);
    c->nq--;
    c->nfill -= !x.prot;
    if (!x.put && !x.prot) {
        /* unprotected destination (stack/TLS, shared page): the 0xFF fill tells */
        long k = 0;
        for (; k + 8 <= x.len; k += 8) {   /* 8 bytes at a time, then find the byte */
            uint64_t v;
            memcpy(&v, l + k, 8);
            if (v != ~(uint64_t)0) break;
        }
        for (; k < x.len; k++)
            if ((unsigned char)l[k] != 0xFF) {
                char d[384];
                describe_xfer(c, &x, d, sizeof d);
                swemu_die(c, "LDM %#lx was written while DMA %s into it was in flight "
                          "(buffer reused before its reply wait)",
                          (unsigned long)(uintptr_t)(x.ldm + k), d);
            }
    }
    c->copying = x.op;
    for (long k = 0; k < x.n; k++) {
        char *m = x.mem + k * (x.chunk + x.gap), *b = l + k * x.chunk;
        if (x.put) {
            memcpy(m, b, x.chunk);
            if (swemu_conflicts_on) swemu_record_write(c, (uintptr_t)m, (uintptr_t)m + x.chunk);
        } else {
            memcpy(b, m, x.chunk);
            if (swemu_conflicts_on) swemu_record_read(c, (uintptr_t)m, (uintptr_t)m + x.chunk);
        }
    }
    c->copying = NULL;
    track(c, &x, -1);
    if (x.reply) __atomic_fetch_add((int *)swemu_em((void *)x.reply), 1, __ATOMIC_SEQ_CST);
}

void swemu_land_all(swemu_cpe *c)
{
    while (c->nq) land(c, 0);
    flush(c);
}

/* ---- the spin timer: a `while (reply != n);` the emulator cannot see ---- */
static void arm(swemu_cpe *c, long ns)
{
    struct itimerspec it = {{0, 0}, {ns / 1000000000, ns % 1000000000}};
    if (!c->has_timer || c->timer_on) return;
    c->timer_on = 1;
    timer_settime((timer_t)c->timer, 0, &it, NULL);
}

static void on_spin(int sig, siginfo_t *si, void *uc)
{
    swemu_cpe *c = swemu_self;
    int e = errno;
    (void)sig; (void)si; (void)uc;
    if (!c) return;
    c->timer_on = 0;
    if (c->in_emu) arm(c, 200000);   /* inside the emulator: try again shortly */
    else swemu_land_all(c);
    errno = e;
}

void swemu_async_thread(swemu_cpe *c)
{
    struct sigevent ev;
    timer_t t;
    sigset_t s;
    if (swemu_dma_mode == 0) return;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SWEMU_SPIN_SIG;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &t) == 0) { c->timer = (void *)t; c->has_timer = 1; }
    sigemptyset(&s);
    sigaddset(&s, SWEMU_SPIN_SIG);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

void swemu_async_init(void)
{
    const char *e = getenv("SWEMU_DMA");
    struct sigaction sa;
    if (e && *e) {
        if (!strcmp(e, "issue")) swemu_dma_mode = 0;
        else if (!strcmp(e, "wait")) swemu_dma_mode = 1;
        else if (!strcmp(e, "random")) swemu_dma_mode = 2;
        else if (!strncmp(e, "random:", 7)) { swemu_dma_mode = 2; seed = (unsigned)strtoul(e + 7, NULL, 0); }
        else swemu_die(NULL, "SWEMU_DMA=%s: expected issue, wait, random or random:SEED", e);
    }
    if ((e = getenv("SWEMU_SPIN_US")) && atol(e) > 0) spin_ns = atol(e) * 1000;
    if ((e = getenv("SWEMU_CHECKS")) && *e) {
        if (!strcmp(e, "fast")) swemu_checks = 0;
        else if (!strcmp(e, "all")) swemu_checks = 1;
        else if (!strcmp(e, "full")) swemu_checks = 2;
        else swemu_die(NULL, "SWEMU_CHECKS=%s: expected fast, all or full", e);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_spin;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(SWEMU_SPIN_SIG, &sa, NULL);
}

/* ---- issue ---- */
static long fdiv(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Do main-memory chunks of a and b share a byte? */
static int mem_overlap(const swemu_xfer *a, const swemu_xfer *b)
{
    long pb = b->chunk + b->gap;
    uintptr_t ahi = (uintptr_t)a->mem + a->n * a->chunk + (a->n - 1) * a->gap;
    uintptr_t bhi = (uintptr_t)b->mem + b->n * b->chunk + (b->n - 1) * b->gap;
    if ((uintptr_t)a->mem >= bhi || (uintptr_t)b->mem >= ahi) return 0;
    for (long k = 0; k < a->n; k++) {
        long lo = (long)((uintptr_t)a->mem - (uintptr_t)b->mem) + k * (a->chunk + a->gap);
        long hi = lo + a->chunk;
        long kmin = fdiv(lo - b->chunk, pb) + 1, kmax = fdiv(hi - 1, pb);
        if (kmin < 0) kmin = 0;
        if (kmax > b->n - 1) kmax = b->n - 1;
        if (kmin <= kmax) return 1;
    }
    return 0;
}

static unsigned next_rand(swemu_cpe *c)
{
    c->rng = c->rng * 1103515245u + 12345u;
    return c->rng >> 8;
}

void swemu_issue(swemu_cpe *c, const swemu_xfer *x0)
{
    swemu_xfer x = *x0;
    uintptr_t lo = (uintptr_t)x.ldm, hi = lo + x.len;
    swemu_enter(c);
    x.seq = ++c->seq;
    if (c->seq == 1) c->rng = seed * 2654435761u + (unsigned)c->id * 40503u + 1;
    for (int i = 0; i < c->nq;)          /* random mode: this call is one more event */
        if (c->q[i].after > 0 && --c->q[i].after == 0) land(c, i);
        else i++;
    for (int i = 0; i < c->nq; i++) {
        swemu_xfer *p = &c->q[i];
        uintptr_t plo = (uintptr_t)p->ldm, phi = plo + p->len;
        char d1[384], d2[384];
        if (!(x.put && p->put) && lo < phi && plo < hi) {
            describe_xfer(c, &x, d1, sizeof d1);
            describe_xfer(c, p, d2, sizeof d2);
            swemu_die(c, "DMA %s uses LDM bytes that DMA %s, still in flight, %s (buffer reused "
                      "before its reply wait)", d1, d2, p->put ? "reads" : "writes");
        }
        if ((x.put || p->put) && mem_overlap(&x, p)) {
            describe_xfer(c, &x, d1, sizeof d1);
            describe_xfer(c, p, d2, sizeof d2);
            swemu_die(c, "DMA %s touches main memory that DMA %s, still in flight, %s (their "
                      "order is undefined until a reply wait)", d1, d2, p->put ? "writes" : "reads");
        }
    }
    if (c->nq == SWEMU_QMAX) land(c, 0);  /* the DMA queue is finite on the chip too */
    x.prot = in_arena(c, lo) && swemu_checks > 0;
    for (size_t p = x.prot ? page_of(c, lo) : 1, e = x.prot ? page_of(c, hi - 1) : 0; p <= e; p++)
        if (c->pg_shared[p] && swemu_checks < 2) x.prot = 0;
    if (!x.put && !x.prot) memset(swemu_em(x.ldm), 0xFF, x.len);   /* poison instead */
    x.after = -1;
    if (swemu_dma_mode == 2) {
        unsigned r = next_rand(c) % 8;
        x.after = r < 2 ? 0 : r < 5 ? (int)r - 1 : -1;   /* now, after 1..3 calls, at wait */
    }
    c->q[c->nq++] = x;
    c->nfill += !x.prot;
    if (swemu_conflicts_on) {
        size_t w = 0, r = 0;
        for (int i = 0; i < c->nq; i++) *(c->q[i].put ? &w : &r) += (size_t)c->q[i].n;
        swemu_reserve(c, w, r);
    }
    track(c, &x, +1);
    if (x.after == 0) land(c, c->nq - 1);
    else arm(c, spin_ns);
    flush(c);
    swemu_leave(c);
}

/* Land the transfers on `reply` in issue order until the wait is satisfied.  exact: v1's
 * `while (reply != n)`, else CRTS's `while (reply < n)`. */
void swemu_wait_reply(const char *op, volatile int *reply, int value, int exact)
{
    swemu_cpe *c = swemu_need_cpe(op);
    int *r = swemu_em((void *)reply);
    swemu_enter(c);
    for (int i = 0; i < c->nq && __atomic_load_n(r, __ATOMIC_SEQ_CST) < value;)
        if (c->q[i].reply == reply) land(c, i);
        else i++;
    flush(c);
    swemu_leave(c);
    if (*r < value)
        swemu_die(c, "%s: reply word is %d, waiting for %d, and no DMA is in flight: the chip "
                  "would wait forever", op, *r, value);
    if (exact && *r != value)
        swemu_die(c, "%s: reply word is %d, waiting for it to equal %d: it went past (more DMA "
                  "on this reply word than waited for?); the chip would wait forever", op, *r, value);
}

void swemu_reply_wait(volatile int *reply, int value)
{
    swemu_wait_reply("reply wait", reply, value, 1);
}

void swemu_kernel_end(swemu_cpe *c)
{
    if (c->nq) {
        char d[384];
        describe_xfer(c, &c->q[0], d, sizeof d);
        swemu_die(c, "returned from the kernel with %d DMA transfer(s) never waited for; the "
                  "first: %s", c->nq, d);
    }
    c->seq = 0;
    memset(c->pg_shared, 0, sizeof c->pg_shared);
}

/* ldm_free of [lo, hi): no DMA may still use it */
void swemu_check_free(swemu_cpe *c, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < c->nq; i++)
        if ((uintptr_t)c->q[i].ldm < hi && (uintptr_t)c->q[i].ldm + c->q[i].len > lo) {
            char d[384];
            describe_xfer(c, &c->q[i], d, sizeof d);
            swemu_die(c, "ldm_free(%#lx): DMA %s is still in flight in this block",
                      (unsigned long)lo, d);
        }
}

/* An access to [a, a + n) by the CPE itself: not into a transfer in flight (any access to a
 * get's destination, a store to a put's source). */
/* the report of swemu_check_access, out of line: the check runs before every instrumented
 * store to the heap while DMA is in flight, and must stay a short loop */
static void __attribute__((noinline, cold, noreturn))
access_in_flight(swemu_cpe *c, const swemu_xfer *x, uintptr_t a, int write)
{
    char d[384], w[160];
    if (a < (uintptr_t)x->ldm) a = (uintptr_t)x->ldm;
    swemu_enter(c);
    describe_xfer(c, x, d, sizeof d);
    swemu_describe_ldm(c, a, w, sizeof w);
    if (x->put)
        swemu_die(c, "store to LDM %#lx (%s) while DMA %s reading it is in flight (buffer "
                  "reused before its reply wait)", (unsigned long)a, w, d);
    swemu_die(c, "%s LDM %#lx (%s) before DMA %s into it landed (missing or misplaced "
              "reply wait)", write ? "store to" : "load from", (unsigned long)a, w, d);
}

void swemu_check_access(swemu_cpe *c, uintptr_t a, size_t n, int write)
{
    /* The spin timer must not land (and shift c->q) while an entry is half read: the
     * check would mix one transfer's address with the next one's length. */
    int was = c->in_emu;
    swemu_enter(c);
    for (int k = 0; k < c->nq; k++) {
        const swemu_xfer *x = &c->q[k];
        if (a + n <= (uintptr_t)x->ldm || a >= (uintptr_t)x->ldm + x->len || (x->put && !write)) continue;
        access_in_flight(c, x, a, write);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    c->in_emu = was;
}

/* A fault at `a` on the calling CPE: 1 = handled (retry the access); 0 = not an LDM
 * arena address; otherwise a report. */
int swemu_fault(swemu_cpe *c, uintptr_t a, int write)
{
    size_t i, off, p;
    char w[160];
    const char *acc = write ? "store to" : "load from";
    if (a < swemu_ldm_lo || a >= swemu_ldm_hi) return 0;
    i = (a - swemu_ldm_lo) / SWEMU_STRIDE;
    off = (a - swemu_ldm_lo) % SWEMU_STRIDE;
    if ((int)i != c->id)
        swemu_die(c, "%s %#lx in the LDM of CPE %zu: another CPE's LDM is not addressable "
                  "(SW26010: register communication; SW26010-Pro: RMA)", acc, (unsigned long)a, i);
    if (off >= SWEMU_ARENA)
        swemu_die(c, "%s %#lx: %zu bytes past the end of the %d-byte LDM", acc, (unsigned long)a,
                  off - SWEMU_LDM_BYTES, SWEMU_LDM_BYTES);
    swemu_enter(c);
    swemu_check_access(c, a, 1, write);
    p = off / SWEMU_PAGE;
    if (p >= c->top_pages) {
        swemu_describe_ldm(c, a, w, sizeof w);
        swemu_die(c, "%s LDM %#lx: %s", acc, (unsigned long)a, w);
    }
    /* another buffer on a page of a transfer in flight: land them now; later transfers
     * on this page are filled and checked instead of protected (unless SWEMU_CHECKS=full) */
    c->pg_shared[p] = 1;
    for (int k = 0; k < c->nq;) {
        uintptr_t lo = (uintptr_t)c->q[k].ldm;
        if (in_arena(c, lo) && page_of(c, lo) <= p && page_of(c, lo + c->q[k].len - 1) >= p) land(c, k);
        else k++;
    }
    flush(c);
    swemu_leave(c);
    if (c->pg_prot[p] == (PROT_READ | PROT_WRITE)) return 1;
    return 0;
}
