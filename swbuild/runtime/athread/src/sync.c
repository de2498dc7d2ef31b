/* sync.c - barriers (athread_syn, CRTS_ssync_*) and CPE ids.
 *
 * Own futex barriers rather than pthread ones, so a barrier that can never complete (a
 * CPE of its scope already returned from the kernel) is reported instead of hanging.
 */
#include "swemu_int.h"

#include <limits.h>
#include <string.h>
#include <linux/futex.h>

typedef struct {
    int n, waiting, finished, gen;
    int first, step;              /* members: first, first + step, ... (n of them) */
    unsigned vc[SWEMU_CPES];      /* the members' merged vector clock (race.c) */
    double cycles;                /* modelled clock the members leave with (timing.c) */
    int scope;                    /* 0 row, 1 column, 2 array */
} bar_t;
static bar_t bar_all, bar_row[SWEMU_CPES / 8], bar_col[8];

/* waiting and finished are each written before the other is read (seq_cst), so of a
 * CPE arriving and a CPE of the same scope leaving the kernel, one sees the other. */
/* The last CPE to arrive merges the members' vector clocks (they wait, theirs are fixed);
 * each member takes the merge on leaving, before it can arrive at this barrier again. */
static void merge(bar_t *b)
{
    memset(b->vc, 0, sizeof b->vc);
    b->cycles = 0;
    for (int m = 0; m < b->n; m++) {
        const swemu_cpe *member = &swemu_cpes[b->first + m * b->step];
        const unsigned *v = member->vc;
        if (member->cycles > b->cycles) b->cycles = member->cycles;   /* the members wait for the latest */
        for (int i = 0; i < SWEMU_CPES; i++)
            if (v[i] > b->vc[i]) b->vc[i] = v[i];
    }
    b->cycles += swemu_sync_cycles(b->scope);
}

static void bar_wait(bar_t *b, swemu_cpe *c, const char *op)
{
    int g = swemu_load(&b->gen);
    swemu_enter(c);          /* no DMA lands (spin timer) while the clock changes */
    swemu_clock_tick(c);
    swemu_leave(c);
    if (__atomic_add_fetch(&b->waiting, 1, __ATOMIC_SEQ_CST) == b->n) {
        swemu_enter(c);
        merge(b);
        swemu_clock_join(c, b->vc);
        c->cycles = b->cycles;
        swemu_leave(c);
        __atomic_store_n(&b->waiting, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&b->gen, g + 1, __ATOMIC_SEQ_CST);
        swemu_futex(&b->gen, FUTEX_WAKE, INT_MAX, NULL);
        return;
    }
    /* A member that returned means this barrier cannot complete, unless it already has: the
     * last to arrive completes it (gen) before it can return (finished), so a CPE held up
     * between its arrival and this check may see members gone from a completed barrier. */
    if (__atomic_load_n(&b->finished, __ATOMIC_SEQ_CST) && __atomic_load_n(&b->gen, __ATOMIC_SEQ_CST) == g)
        swemu_die(c, "%s can never complete: %d CPE(s) of its scope already returned from "
                  "the kernel (the chip would hang)", op, b->finished);
    c->bar_gen = &b->gen;
    c->bar_gen_seen = g;
    c->state = 2;
    while (swemu_load(&b->gen) == g) swemu_futex(&b->gen, FUTEX_WAIT, g, NULL);
    swemu_enter(c);
    swemu_clock_join(c, b->vc);
    c->cycles = b->cycles;
    swemu_leave(c);
    c->state = 1;
}

static void bar_leave(bar_t *b, swemu_cpe *c)
{
    int w;
    __atomic_add_fetch(&b->finished, 1, __ATOMIC_SEQ_CST);
    if ((w = __atomic_load_n(&b->waiting, __ATOMIC_SEQ_CST)))
        swemu_die(c, "returned from the kernel while %d CPE(s) wait for it in a barrier "
                  "(the chip would hang)", w);
}

void swemu_sync(int scope, int mask, const char *op)
{
    swemu_cpe *c = swemu_need_cpe(op);
    swemu_redzones(c, op, SIZE_MAX);
    switch (scope) {
    case 0: /* ROW_SCOPE */
        if ((mask & 0xff) != 0xff) break;
        bar_wait(&bar_row[c->id / 8], c, op);
        return;
    case 1: /* COL_SCOPE */
        if ((mask & 0xff) != 0xff) break;
        bar_wait(&bar_col[c->id % 8], c, op);
        return;
    case 2: /* ARRAY_SCOPE */
        if ((mask & 0xffff) != 0xffff) break;
        bar_wait(&bar_all, c, op);
        return;
    default:
        swemu_die(c, "%s: unknown scope %d", op, scope);
    }
    swemu_die(c, "%s: partial mask 0x%x is not emulated (only full rows, columns, array)", op, mask);
}

int athread_syn(int scp, int mask) { swemu_sync(scp, mask, "athread_syn"); return 0; }
void CRTS_ssync_array(void) { swemu_sync(2, 0xffff, "CRTS_ssync_array"); }
void CRTS_ssync_row(void) { swemu_sync(0, 0xff, "CRTS_ssync_row"); }
void CRTS_ssync_col(void) { swemu_sync(1, 0xff, "CRTS_ssync_col"); }
int athread_get_id(int core) { return core < 0 ? swemu_tid : core; }
int athread_get_core(int id) { return id < 0 ? swemu_tid : id; }

void swemu_bar_reset(void)      /* at spawn, all CPEs idle: plain stores are safe */
{
    bar_all = (bar_t){SWEMU_CPES, 0, 0, bar_all.gen, 0, 1, {0}, 0, 2};
    for (int i = 0; i < SWEMU_CPES / 8; i++) bar_row[i] = (bar_t){8, 0, 0, bar_row[i].gen, 8 * i, 1, {0}, 0, 0};
    for (int i = 0; i < 8; i++) bar_col[i] = (bar_t){SWEMU_CPES / 8, 0, 0, bar_col[i].gen, i, 8, {0}, 0, 1};
}

void swemu_bar_leave(swemu_cpe *c)   /* c returned from the kernel */
{
    bar_leave(&bar_all, c);
    bar_leave(&bar_row[c->id / 8], c);
    bar_leave(&bar_col[c->id % 8], c);
}
