/* regcomm.c - register communication between the CPEs of a mesh row or column (SW26010).
 *
 * A put sends one 256-bit message from a CPE's registers to a CPE of its row (putr) or column
 * (putc), or to the other 7 of them (destination 8: broadcast); a get takes the oldest message
 * from the CPE's row (getr) or column (getc) receive buffer and waits while it is empty. The
 * buffer holds SWEMU_REGCOMM_DEPTH messages (toolchain `regcomm_buffer_entries`); a put waits
 * while a receiver's buffer is full.
 *
 * What the chip would do wrong is reported: a destination outside 0..8 or the sender itself,
 * a put to a CPE that already returned from the kernel, messages left unreceived at the end
 * of the kernel (they would be read by the next kernel's gets), two senders into one buffer
 * with nothing ordering their puts (the order they arrive in depends on timing), and deadlock
 * (every CPE waits: in a get, a put or a barrier, or returned).
 *
 * A message orders the sender's accesses before the put before the receiver's accesses after
 * the get (race.c's vector clocks): the sender starts a new epoch at the put and the receiver
 * merges the clock the message carries.
 *
 * Speed: a waiting CPE first yields its core (the peer it waits for is usually runnable), then
 * sleeps on its own condition variable, which only the moves that can unblock it signal.
 * A CPE that was signalled, or that a barrier released, and has not run yet is not stuck: on a
 * loaded machine (load 50 on 2 cores) one can wait longer than RC_STUCK_S for its core, and a
 * light model's mesh kernels were reported as deadlocked that way.
 * Waking all 64 on every message cost about 11 us per get on 2 cores; this costs about 0.4
 * (benchmarks/regcomm_throughput.py).
 */
#include "swemu_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#ifndef SWEMU_REGCOMM_DEPTH
#define SWEMU_REGCOMM_DEPTH 4          /* toolchain regcomm_buffer_entries */
#endif
#define RC_BYTES 32                    /* one 256-bit register */
#define RC_SPINS 64                    /* yields before a waiting CPE sleeps: with 64 threads on a
                                          few cores the peer it waits for is usually runnable */
#define RC_TICK_NS 20000000L           /* deadlock check every 20 ms of waiting */
#define RC_STUCK_S 1.0                 /* all waiting this long, nothing moving: deadlock (a CPE
                                          a barrier released may not have run yet) */

typedef struct {
    unsigned char data[RC_BYTES];
    int from;
    unsigned vc[SWEMU_CPES];           /* the sender's clock after its put's new epoch */
    double cycles;                     /* the sender's modelled clock at the put (timing.c) */
} rc_msg;

typedef struct {
    rc_msg m[SWEMU_REGCOMM_DEPTH];
    int head, n;
    int last_from;                     /* sender of the last message put into it, -1 none */
    unsigned last_stamp;               /* that sender's own clock after the put */
} rc_fifo;

static rc_fifo rx[SWEMU_CPES][2];      /* [receiver][0 row, 1 column] */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv[SWEMU_CPES];   /* each CPE sleeps on its own: a move wakes only the
                                                CPEs it can unblock, not all 64 */
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static int sleeping[SWEMU_CPES];
static int woken[SWEMU_CPES];          /* signalled since it last checked its condition */
static unsigned long moves;            /* messages put or taken: progress */
static const char *waiting_in[SWEMU_CPES];   /* the op a CPE waits in, else NULL */
static int gone[SWEMU_CPES];           /* returned from the kernel (its buffers checked) */

static const char *const dir_name[2] = {"row", "column"};

static void init_cvs(void)
{
    for (int i = 0; i < SWEMU_CPES; i++) pthread_cond_init(&wake_cv[i], NULL);
}

void swemu_rc_reset(void)              /* at spawn, all CPEs idle */
{
    pthread_once(&cv_once, init_cvs);
    for (int i = 0; i < SWEMU_CPES; i++) {
        for (int d = 0; d < 2; d++) rx[i][d] = (rc_fifo){.last_from = -1};
        waiting_in[i] = NULL;
        woken[i] = 0;
        gone[i] = 0;
    }
}

/* The CPE `dst` (0..7) of c's row (dir 0) or column (dir 1). */
static int peer(int id, int dir, int dst)
{
    return dir == 0 ? id / 8 * 8 + dst : dst * 8 + id % 8;
}

static int nmembers(int dir) { return dir == 0 ? 8 : SWEMU_CPES / 8; }

static void describe_all(char *buf, size_t n)
{
    size_t o = 0;
    int shown = 0;
    buf[0] = 0;
    for (int i = 0; i < SWEMU_CPES && o + 64 < n; i++) {
        const char *w = waiting_in[i];
        if (!w) continue;
        if (shown++ == 8) { snprintf(buf + o, n - o, ", ..."); return; }
        o += snprintf(buf + o, n - o, "%sCPE %d in %s", shown > 1 ? ", " : "", i, w);
    }
}

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Called with mu held by a CPE that cannot go on: every CPE waiting (here, in a barrier) or
 * returned, with nothing moved for RC_STUCK_S, is a deadlock on the chip. *since: when the
 * current quiet stretch began (0: not in one). */
static void check_deadlock(swemu_cpe *c, unsigned long *seen, double *since)
{
    int stuck = 0;
    char who[640];
    if (moves != *seen) { *seen = moves; *since = 0; return; }
    for (int i = 0; i < SWEMU_CPES; i++) {
        const swemu_cpe *o = &swemu_cpes[i];
        int held = o->state == 2 && o->bar_gen && swemu_load((int *)o->bar_gen) == o->bar_gen_seen;   /* barrier not released */
        stuck += (waiting_in[i] != NULL && !woken[i]) || gone[i] || held;
    }
    if (stuck < SWEMU_CPES) { *since = 0; return; }
    if (*since == 0) *since = mono();
    if (mono() - *since < RC_STUCK_S) return;
    describe_all(who, sizeof who);
    swemu_die(c, "register communication deadlock: every CPE waits or has returned (%s; the "
              "others in a barrier or returned); the chip would hang", who);
}

/* Called with mu held; returns with it held, after yielding or sleeping: the caller re-checks.
 * The first RC_SPINS waits of an operation yield the core (its peer is usually runnable);
 * later ones sleep until a move wakes this CPE, checking for deadlock every RC_TICK_NS. */
static void wait_turn(swemu_cpe *c, const char *op, unsigned long *seen, double *since, int *spins)
{
    struct timespec ts;
    woken[c->id] = 0;                  /* checking its condition now: what signalled it is seen */
    if ((*spins)++ < RC_SPINS) {       /* runnable while it yields: not waiting */
        pthread_mutex_unlock(&mu);
        sched_yield();
        pthread_mutex_lock(&mu);
        return;
    }
    waiting_in[c->id] = op;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += RC_TICK_NS;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    sleeping[c->id] = 1;
    if (pthread_cond_timedwait(&wake_cv[c->id], &mu, &ts) == ETIMEDOUT) check_deadlock(c, seen, since);
    sleeping[c->id] = 0;
    waiting_in[c->id] = NULL;
}

static void wake(int id)               /* with mu held */
{
    if (sleeping[id]) {
        pthread_cond_signal(&wake_cv[id]);
        woken[id] = 1;
    }
}

void swemu_rc_put(int dir, const void *v, size_t size, int dst, const char *op)
{
    swemu_cpe *c = swemu_need_cpe(op);
    int to[8], nto = 0, me = dir == 0 ? c->id % 8 : c->id / 8;
    double since = 0;
    unsigned long seen = 0;
    int spins = 0;
    if (size > RC_BYTES)
        swemu_die(c, "%s: a message is one 256-bit register (32 bytes), not %zu bytes", op, size);
    if (dst < 0 || dst > nmembers(dir))
        swemu_die(c, "%s: destination %d is not a %s position 0..%d or %d (broadcast)", op, dst,
                  dir_name[dir], nmembers(dir) - 1, nmembers(dir));
    if (dst == me)
        swemu_die(c, "%s: destination %d is the sender itself", op, dst);
    for (int i = 0; i < nmembers(dir); i++)
        if ((dst == nmembers(dir) && i != me) || i == dst) to[nto++] = peer(c->id, dir, i);
    swemu_enter(c);
    pthread_mutex_lock(&mu);
    for (;;) {
        int full = 0;
        for (int i = 0; i < nto; i++) {
            if (gone[to[i]])
                swemu_die(c, "%s to CPE %d, which already returned from the kernel", op, to[i]);
            full |= rx[to[i]][dir].n == SWEMU_REGCOMM_DEPTH;
        }
        if (!full) break;
        wait_turn(c, op, &seen, &since, &spins);
    }
    swemu_clock_tick(c);               /* a new epoch: what came before is ordered before the gets */
    c->cycles += swemu_regcomm_message();   /* the put's issue interval (timing.c), broadcast or not */
    for (int i = 0; i < nto; i++) {
        rc_fifo *f = &rx[to[i]][dir];
        rc_msg *m = &f->m[(f->head + f->n) % SWEMU_REGCOMM_DEPTH];
        if (f->last_from >= 0 && f->last_from != c->id && c->vc[f->last_from] < f->last_stamp)
            swemu_die(c, "%s to CPE %d: CPE %d also sends into its %s buffer and nothing orders "
                      "the two puts (no barrier or message between them): the order CPE %d "
                      "receives them in depends on timing on the chip", op, to[i], f->last_from,
                      dir_name[dir], to[i]);
        memset(m->data, 0, RC_BYTES);
        memcpy(m->data, v, size);
        m->from = c->id;
        m->cycles = c->cycles;
        memcpy(m->vc, c->vc, sizeof m->vc);
        f->n++;
        f->last_from = c->id;
        f->last_stamp = c->vc[c->id];
    }
    c->rc_puts[dir]++;
    moves++;
    for (int i = 0; i < nto; i++) wake(to[i]);     /* a receiver waiting in a get */
    pthread_mutex_unlock(&mu);
    swemu_leave(c);
}

void swemu_rc_get(int dir, void *v, size_t size, const char *op)
{
    swemu_cpe *c = swemu_need_cpe(op);
    rc_fifo *f = &rx[c->id][dir];
    rc_msg m;
    double since = 0;
    unsigned long seen = 0;
    int spins = 0;
    if (size > RC_BYTES)
        swemu_die(c, "%s: a message is one 256-bit register (32 bytes), not %zu bytes", op, size);
    swemu_enter(c);
    pthread_mutex_lock(&mu);
    while (f->n == 0) wait_turn(c, op, &seen, &since, &spins);
    m = f->m[f->head];
    f->head = (f->head + 1) % SWEMU_REGCOMM_DEPTH;
    f->n--;
    c->rc_gets[dir]++;
    moves++;
    for (int i = 0; i < nmembers(dir); i++)        /* a sender waiting for room: one of my row/column */
        wake(peer(c->id, dir, i));
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < SWEMU_CPES; i++)
        if (m.vc[i] > c->vc[i]) c->vc[i] = m.vc[i];
    swemu_clock_tick(c);               /* later accesses: a new epoch, after the sender's put */
    if (m.cycles + swemu_regcomm_latency() > c->cycles) c->cycles = m.cycles + swemu_regcomm_latency();
    memcpy(v, m.data, size);
    swemu_leave(c);
}

void swemu_rc_kernel_end(swemu_cpe *c)     /* c returned from the kernel */
{
    pthread_mutex_lock(&mu);
    for (int d = 0; d < 2; d++) {
        rc_fifo *f = &rx[c->id][d];
        if (f->n) {
            int from = f->m[f->head].from, n = f->n;
            pthread_mutex_unlock(&mu);
            swemu_die(c, "returned from the kernel with %d message(s) in its %s receive buffer "
                      "(the first from CPE %d) never taken by a get%s: the next kernel's gets would "
                      "read them", n, dir_name[d], from, d ? "c" : "r");
        }
    }
    gone[c->id] = 1;                   /* later puts to it are errors */
    moves++;                           /* a CPE waiting for this one re-checks for deadlock */
    for (int i = 0; i < SWEMU_CPES; i++) wake(i);
    pthread_mutex_unlock(&mu);
}

/* The same waiting and deadlock detection for RMA reply waits (rma.c): a CPE waiting for an
 * RMA reply counts as waiting, an RMA landing or issue as a move. */
void swemu_mesh_lock(void) { pthread_mutex_lock(&mu); }
void swemu_mesh_unlock(void) { pthread_mutex_unlock(&mu); }
void swemu_mesh_wait(swemu_cpe *c, const char *op, unsigned long *seen, double *since, int *spins)
{
    wait_turn(c, op, seen, since, spins);
}
void swemu_mesh_moved(int id)          /* with the lock held: progress, and CPE id may go on */
{
    moves++;
    wake(id);
}
int swemu_mesh_gone(int id) { return gone[id]; }

int swemu_rc_waiting(void)             /* CPEs waiting in a get or put (timeout reports) */
{
    int n = 0;
    for (int i = 0; i < SWEMU_CPES; i++) n += waiting_in[i] != NULL;
    return n;
}
