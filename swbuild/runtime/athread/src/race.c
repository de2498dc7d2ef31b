/* race.c - what CPEs did to main memory by DMA in one spawn: write conflicts (bytes two
 * CPEs write) and races (bytes one CPE reads and another writes), each with no barrier
 * between them, plus the names the host registered for main-memory arrays.
 *
 * Barrier order: vector clocks.  Each CPE counts the barriers it passed (vc[own]) and, for
 * every other CPE, the last of its barriers it is ordered after: a barrier merges the clocks
 * of its members (sync.c), so order through chains of row, column and array barriers is
 * followed.  A range carries its CPE's clock of the time (an index into the CPE's snapshots,
 * one per epoch with ranges); access X of CPE a precedes Y of CPE b iff b's clock at Y has
 * passed a's own count at X.
 */
#include "swemu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names of main-memory arrays (swemu_register, from host code) ---- */
typedef struct { uintptr_t lo, hi; char *name; } named;
static named *names;
static int nnames, names_cap;

void swemu_register(const void *p, size_t bytes, const char *name)
{
    /* generated host code names a kernel's buffers before every spawn: the same name again
     * moves to the end (it wins) instead of growing the list */
    for (int i = nnames - 1; i >= 0; i--)
        if (names[i].lo == (uintptr_t)p && names[i].hi == (uintptr_t)p + bytes && !strcmp(names[i].name, name)) {
            named keep = names[i];
            memmove(&names[i], &names[i + 1], (nnames - i - 1) * sizeof *names);
            names[nnames - 1] = keep;
            return;
        }
    if (nnames == names_cap) {
        names_cap = names_cap ? 2 * names_cap : 32;
        names = realloc(names, names_cap * sizeof *names);
        if (!names) swemu_die(NULL, "out of memory");
    }
    names[nnames++] = (named){(uintptr_t)p, (uintptr_t)p + bytes, strdup(name)};
}

/* " (name+offset)" for a registered address, else "" (the last registration wins) */
void swemu_name_of(uintptr_t a, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = nnames - 1; i >= 0; i--)
        if (a >= names[i].lo && a < names[i].hi) {
            snprintf(buf, n, " (%s+%lu)", names[i].name, (unsigned long)(a - names[i].lo));
            return;
        }
}

/* ---- vector clocks ---- */
void swemu_clock_reset(swemu_cpe *c)
{
    memset(c->vc, 0, sizeof c->vc);
    c->nsnap = 0;
    c->snap_fresh = 0;
}

/* Room for one more snapshot: made at every barrier and DMA issue, since ranges may be
 * recorded in a signal handler (DMA landing on the spin timer), where malloc must not run. */
static void snap_room(swemu_cpe *c)
{
    void *p;
    size_t cap = 2 * c->snap_cap + 16;
    if (c->nsnap + 1 <= c->snap_cap) return;
    if (!(p = realloc(c->snap, cap * sizeof *c->snap)))
        swemu_die(c, "out of memory recording barrier clocks (SWEMU_CONFLICTS=0 turns this off)");
    c->snap = p;
    c->snap_cap = cap;
}

void swemu_clock_tick(swemu_cpe *c)     /* c arrives at a barrier: a new epoch */
{
    c->vc[c->id]++;
    c->snap_fresh = 0;
    snap_room(c);
}

void swemu_clock_join(swemu_cpe *c, const unsigned *vc)   /* c leaves a barrier with the members' merge */
{
    memcpy(c->vc, vc, sizeof c->vc);
    /* A transfer that landed while c waited (the spin timer) took a snapshot of the clock
     * before the merge; accesses from now on are ordered after the barrier, so they need a
     * new one (reusing it made them look unordered with the other members' earlier ones). */
    c->snap_fresh = 0;
}

static unsigned snapshot(swemu_cpe *c)
{
    if (!c->snap_fresh) {
        snap_room(c);
        memcpy(c->snap[c->nsnap++], c->vc, sizeof c->vc);
        c->snap_fresh = 1;
    }
    return (unsigned)(c->nsnap - 1);
}

static void add(swemu_cpe *c, swemu_range **v, size_t *n, size_t *cap, uintptr_t lo, uintptr_t hi)
{
    swemu_range *l = *n ? &(*v)[*n - 1] : NULL;
    unsigned snap = snapshot(c);
    if (l && l->hi == lo && l->snap == snap) {
        l->hi = hi;                      /* consecutive chunks of one epoch: one range */
        return;
    }
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *v = realloc(*v, *cap * sizeof **v);
        if (!*v) swemu_die(c, "out of memory recording DMA ranges (SWEMU_CONFLICTS=0 turns this off)");
    }
    (*v)[(*n)++] = (swemu_range){lo, hi, snap};
}

void swemu_record_write(swemu_cpe *c, uintptr_t lo, uintptr_t hi) { add(c, &c->w, &c->nw, &c->w_cap, lo, hi); }

/* Room for `more` ranges without realloc: transfers in flight may land in a signal handler
 * (async.c: the spin timer), where malloc must not be called. */
static void reserve(swemu_cpe *c, swemu_range **v, size_t n, size_t *cap, size_t more)
{
    if (n + more <= *cap) return;
    *cap = 2 * (n + more) + 64;
    *v = realloc(*v, *cap * sizeof **v);
    if (!*v) swemu_die(c, "out of memory recording DMA ranges (SWEMU_CONFLICTS=0 turns this off)");
}
void swemu_reserve(swemu_cpe *c, size_t writes, size_t reads)
{
    reserve(c, &c->w, c->nw, &c->w_cap, writes);
    reserve(c, &c->r, c->nr, &c->r_cap, reads);
    snap_room(c);
}
void swemu_record_read(swemu_cpe *c, uintptr_t lo, uintptr_t hi) { add(c, &c->r, &c->nr, &c->r_cap, lo, hi); }


/* ---- write conflicts: bytes that two CPEs wrote by DMA in one spawn, unordered ---- */
typedef struct { swemu_range r; int cpe; } acc;

static int acc_cmp(const void *x, const void *y)
{
    const acc *a = x, *b = y;
    return a->r.lo < b->r.lo ? -1 : a->r.lo > b->r.lo;
}

static int range_cmp(const void *x, const void *y)     /* by start */
{
    const swemu_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* a before b, or b before a, by the barriers between them (vector clocks) */
static int ordered(const acc *a, const acc *b)
{
    const unsigned *va = swemu_cpes[a->cpe].snap[a->r.snap], *vb = swemu_cpes[b->cpe].snap[b->r.snap];
    return vb[a->cpe] > va[a->cpe] || va[b->cpe] > vb[b->cpe];
}

/* All write ranges of the spawn, sorted by start; *n of them (NULL when none). */
static acc *all_writes(size_t *n)
{
    size_t k = 0;
    acc *w;
    *n = 0;
    for (int i = 0; i < SWEMU_CPES; i++) *n += swemu_cpes[i].nw;
    if (!*n || !(w = malloc(*n * sizeof *w))) return NULL;
    for (int i = 0; i < SWEMU_CPES; i++)
        for (size_t j = 0; j < swemu_cpes[i].nw; j++) w[k++] = (acc){swemu_cpes[i].w[j], i};
    qsort(w, *n, sizeof *w, acc_cmp);
    return w;
}

/* Bytes that two CPEs wrote with no barrier between the writes (their final value depends
 * on timing; the same bytes rewritten after a barrier, as kernels of one grouped launch
 * reuse arena bytes, are not a conflict): the union of the overlaps of every unordered pair
 * of write ranges of different CPEs. *first, *ca, *cb: the lowest such byte and a pair. */
uint64_t swemu_conflicts(uintptr_t *first, int *ca, int *cb)
{
    swemu_range hull[SWEMU_CPES];
    int nh = 0, found = 0;
    size_t nw, ns = 0, scap = 0;
    uint64_t total = 0;
    uintptr_t end = 0;
    acc *w;
    swemu_range *sp = NULL;            /* the unordered overlaps (snap unused) */
    /* fast path: CPEs whose written address hulls are disjoint cannot conflict */
    for (int i = 0; i < SWEMU_CPES; i++) {
        swemu_cpe *c = &swemu_cpes[i];
        if (!c->nw) continue;
        hull[nh] = c->w[0];
        for (size_t j = 1; j < c->nw; j++) {
            if (c->w[j].lo < hull[nh].lo) hull[nh].lo = c->w[j].lo;
            if (c->w[j].hi > hull[nh].hi) hull[nh].hi = c->w[j].hi;
        }
        nh++;
    }
    qsort(hull, nh, sizeof *hull, range_cmp);
    for (int i = 1; i < nh; i++)
        if (hull[i].lo < hull[i - 1].hi) found = 1;
        else if (hull[i - 1].hi > hull[i].hi) hull[i].hi = hull[i - 1].hi;
    if (!found || !(w = all_writes(&nw))) return 0;
    for (size_t i = 0; i < nw; i++)
        for (size_t j = i + 1; j < nw && w[j].r.lo < w[i].r.hi; j++) {
            uintptr_t hi = w[i].r.hi < w[j].r.hi ? w[i].r.hi : w[j].r.hi;
            if (w[j].cpe == w[i].cpe || ordered(&w[i], &w[j])) continue;
            if (ns == scap) {
                swemu_range *q = realloc(sp, (scap = 2 * scap + 64) * sizeof *sp);
                if (!q) { free(sp); free(w); return 0; }
                sp = q;
            }
            sp[ns++] = (swemu_range){.lo = w[j].r.lo, .hi = hi};
            if (ns == 1 || w[j].r.lo < *first) { *first = w[j].r.lo; *ca = w[i].cpe; *cb = w[j].cpe; }
        }
    qsort(sp, ns, sizeof *sp, range_cmp);
    for (size_t i = 0; i < ns; i++) {                /* the union of the overlaps */
        uintptr_t lo = sp[i].lo > end ? sp[i].lo : end;
        if (sp[i].hi > lo) total += sp[i].hi - lo;
        if (sp[i].hi > end) end = sp[i].hi;
    }
    if (ns && *ca > *cb) { int t = *ca; *ca = *cb; *cb = t; }
    free(sp);
    free(w);
    return total;
}

/* ---- races: bytes read by one CPE and written by another, unordered by barriers ---- */

uint64_t swemu_races(uintptr_t *first, int *reader, int *writer)
{
    size_t nw;
    uint64_t total = 0;
    acc *w = all_writes(&nw);
    uintptr_t *maxhi;
    if (!w) return 0;
    if (!(maxhi = malloc(nw * sizeof *maxhi))) { free(w); return 0; }
    for (size_t i = 0; i < nw; i++) maxhi[i] = i && maxhi[i - 1] > w[i].r.hi ? maxhi[i - 1] : w[i].r.hi;
    for (int i = 0; i < SWEMU_CPES; i++) {
        swemu_cpe *c = &swemu_cpes[i];
        for (size_t j = 0; j < c->nr; j++) {
            acc rd = {c->r[j], i};
            size_t lo = 0, hi = nw;
            while (lo < hi) {                 /* first write whose prefix max end > rd.lo */
                size_t m = (lo + hi) / 2;
                if (maxhi[m] > rd.r.lo) hi = m; else lo = m + 1;
            }
            for (size_t t = lo; t < nw && w[t].r.lo < rd.r.hi; t++) {
                uintptr_t a, b;
                if (w[t].cpe == i || w[t].r.hi <= rd.r.lo || ordered(&rd, &w[t])) continue;
                a = w[t].r.lo > rd.r.lo ? w[t].r.lo : rd.r.lo;
                b = w[t].r.hi < rd.r.hi ? w[t].r.hi : rd.r.hi;
                if (!total || a < *first) { *first = a; *reader = i; *writer = w[t].cpe; }
                total += b - a;
            }
        }
    }
    free(w);
    free(maxhi);
    return total;
}
