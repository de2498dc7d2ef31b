/* swemu_int.h - private state of the Athread emulator (not installed for user code). */
#ifndef SWEMU_INT_H
#define SWEMU_INT_H

#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include "swemu.h"

#define SWEMU_EXIT 86            /* exit status of every fatal emulator error */
#define SWEMU_HIST 40            /* power-of-two buckets of DMA sizes */
#ifdef SWEMU_API_CRTS
#define SWEMU_ALIGN 64           /* ldm_malloc granule: one doublev8 */
#else
#define SWEMU_ALIGN 32           /* ldm_malloc granule: one doublev4 */
#endif

#ifndef SWEMU_DMA_ALIGN
#define SWEMU_DMA_ALIGN 1        /* toolchain dma_align_bytes: addresses and sizes of DMA */
#endif
#define SWEMU_PAGE 4096          /* LDM protection granule (x86 page) */
/* Each CPE's arena is twice the modelled LDM: a block at heap offset o (accounting, first
 * fit within SWEMU_LDM_BYTES) sits at arena offset 2 o, so every block of n bytes is
 * followed by n bytes of redzone (redzone.c) that no capacity check counts. */
#define SWEMU_ARENA (2 * SWEMU_LDM_BYTES)
#define SWEMU_ARENA_PAGES (SWEMU_ARENA / SWEMU_PAGE)
#define SWEMU_GUARD SWEMU_PAGE   /* inaccessible gap after each CPE's arena */
#define SWEMU_STRIDE ((uintptr_t)SWEMU_ARENA + SWEMU_GUARD)
#define SWEMU_SPIN_SIG (SIGRTMIN + 5)   /* spin timer: lands DMA a `while (reply != n);` waits for */
#define SWEMU_QMAX 256           /* DMA transfers in flight per CPE */

typedef struct { uintptr_t lo, hi; unsigned snap; } swemu_range;   /* + the CPE's clock then (race.c) */
typedef struct { size_t off, size, req; } swemu_blk;   /* off: arena offset (2 x heap offset) */

/* One DMA transfer in flight (asynchronous modes): it lands - data copied, reply += 1 -
 * at a point the emulator chooses between issue and the matching wait. */
typedef struct {
    const char *op;
    int put;
    unsigned seq;                 /* 1 = the CPE's first DMA of this spawn */
    char *mem, *ldm;              /* main-memory side, LDM side (CPE view) */
    long len, chunk, gap, n;      /* n chunks of `chunk` bytes, `gap` skipped in memory */
    volatile int *reply;
    int after;                    /* random mode: land after this many more events; -1 never */
    int prot;                     /* its LDM pages are protected (else: 0xFF-filled, checked) */
} swemu_xfer;

/* Counters aggregated per kernel name, in first-spawn order. */
typedef struct {
    char *name;
    uint64_t spawns, get_ops, get_bytes, put_ops, put_bytes, hist[SWEMU_HIST];
    uint64_t leaked, conflicts, races;
    uint64_t rc_puts[2], rc_gets[2];   /* register communication messages, [0] row, [1] column (regcomm.c) */
    uint64_t rma_ops[5], rma_bytes, rma_recv_bytes;   /* RMA (rma.c): ops per form, bytes read, bytes landed */
    size_t peak;
    double seconds;
    int warned, race_warned;
} swemu_kstat;

typedef struct swemu_cpe {
    int id;
    char *ldm;                    /* this CPE's LDM arena (ldm_malloc heap) */
    uintptr_t region_lo;          /* start of this thread's stack mapping (guard zone) */
    uintptr_t stk_lo, stk_hi;     /* usable stack + TLS (= stack part of the LDM) */
    uintptr_t entry_sp;           /* stack pointer where kernels are entered */
    uintptr_t stk_floor;          /* lowest page the stack may ever use (guard below) */
    /* heap, first fit over blocks sorted by offset */
    swemu_blk *blk; int nblk, blk_cap;
    size_t heap_used, heap_peak;
    /* counters of the current spawn, owned by the CPE thread while it runs */
    uint64_t get_ops, get_bytes, put_ops, put_bytes, hist[SWEMU_HIST], leaked;
    uint64_t rc_puts[2], rc_gets[2];   /* register communication: puts issued, messages taken; [0] row, [1] column */
    uint64_t rma_ops[5], rma_bytes, rma_recv_bytes;   /* RMA issued by this CPE (rma.c) */
    /* main-memory ranges written by puts in the current spawn (conflict detection) */
    swemu_range *w; size_t nw, w_cap;
    swemu_range *r; size_t nr, r_cap;   /* ranges read by gets (race detection) */
    /* vector clock (race.c): vc[k] = barriers of CPE k this CPE is ordered after (own: passed) */
    unsigned vc[SWEMU_CPES];
    unsigned (*snap)[SWEMU_CPES]; size_t nsnap, snap_cap;   /* vc of each epoch with ranges */
    int snap_fresh;                     /* snap[nsnap - 1] is the current vc */
    volatile int state;           /* 0 idle, 1 running, 2 in a barrier, 3 returned (regcomm.c
                                     keeps who waits in a get or put itself) */
    volatile int *bar_gen;        /* in a barrier (state 2): its generation word and the value */
    int bar_gen_seen;             /* it waits to change (released but not yet running: not stuck) */
    double t_done;                /* when it returned from the current kernel */
    double cycles;                /* modelled clock (timing.c) */
    /* asynchronous DMA (async.c): transfers in flight, in issue order */
    swemu_xfer q[SWEMU_QMAX]; int nq;
    unsigned seq, rng;
    volatile int in_emu;          /* inside the emulator: the spin timer must not land */
    const char *volatile copying; /* the DMA op whose data is being copied (fault reports) */
    void *timer; int has_timer, timer_on;
    /* arena page protection: in-flight gets/puts per page, pages above the heap top */
    unsigned short pg_get[SWEMU_ARENA_PAGES], pg_put[SWEMU_ARENA_PAGES];
    unsigned char pg_prot[SWEMU_ARENA_PAGES];
    unsigned char pg_shared[SWEMU_ARENA_PAGES];   /* false sharing seen this spawn: fill, not protect */
    size_t top_pages;             /* pages [top_pages, end) are above every live block */
    unsigned char live[SWEMU_ARENA / SWEMU_ALIGN / 8];   /* granules in live blocks (access.c) */
    uintptr_t ok_lo, ok_hi;       /* the live block the last checked access hit (access.c) */
    int nfill;                    /* transfers in flight whose pages are not protected */
} swemu_cpe;

/* The emulator's own bookkeeping of a CPE runs between these: the spin timer (async.c) does
 * not land a DMA in between. The signal fences keep the compiler from moving the bookkeeping's
 * memory accesses out of the window (the timer's signal is delivered to this same thread). */
static inline void swemu_enter(swemu_cpe *c) { c->in_emu = 1; __atomic_signal_fence(__ATOMIC_SEQ_CST); }
static inline void swemu_leave(swemu_cpe *c) { __atomic_signal_fence(__ATOMIC_SEQ_CST); c->in_emu = 0; }

extern swemu_cpe swemu_cpes[SWEMU_CPES];
extern __thread swemu_cpe *swemu_self;
extern size_t swemu_static_ldm;   /* bytes of TLS (= __thread_local/__ldm data) */
extern uintptr_t swemu_ldm_lo, swemu_ldm_hi;  /* all arenas, one block */
extern uintptr_t swemu_stk_lo, swemu_stk_hi;  /* all CPE stack mappings, one block */
extern size_t swemu_stk_region;               /* bytes of one CPE's stack mapping */
extern int swemu_conflicts_on;
extern int swemu_dma_mode;        /* SWEMU_DMA: 0 issue, 1 wait, 2 random */
extern int swemu_checks;          /* SWEMU_CHECKS: 0 fast, 1 default, 2 full */
extern char *swemu_alias;         /* the arenas again, never protected: the emulator's view */

const char *swemu_kernel(void);
long swemu_futex(int *addr, int op, int val, const struct timespec *ts);
static inline int swemu_load(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void swemu_bar_reset(void);                                     /* see sync.c */
void swemu_bar_leave(swemu_cpe *c);
swemu_kstat *swemu_kernel_stat(const char *name);               /* see stats.c */
void swemu_write_stats(void);
void swemu_die(swemu_cpe *c, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
swemu_cpe *swemu_need_cpe(const char *op);
size_t swemu_stack_depth(swemu_cpe *c);
int swemu_in_ldm(swemu_cpe *t, uintptr_t lo, uintptr_t hi);    /* see ldm.c; t may be another CPE */
void swemu_where(uintptr_t a, char *buf, size_t n);
void swemu_heap_reset(swemu_cpe *c);
/* race.c */
uint64_t swemu_conflicts(uintptr_t *first, int *a, int *b);
uint64_t swemu_races(uintptr_t *first, int *reader, int *writer);
void swemu_record_write(swemu_cpe *c, uintptr_t lo, uintptr_t hi);
void swemu_record_read(swemu_cpe *c, uintptr_t lo, uintptr_t hi);
void swemu_reserve(swemu_cpe *c, size_t writes, size_t reads);
void swemu_name_of(uintptr_t a, char *buf, size_t n);
void swemu_clock_reset(swemu_cpe *c);
void swemu_clock_tick(swemu_cpe *c);
void swemu_clock_join(swemu_cpe *c, const unsigned *vc);
/* async.c */
void swemu_async_init(void);
void swemu_async_thread(swemu_cpe *c);
void swemu_issue(swemu_cpe *c, const swemu_xfer *x);
void swemu_land_all(swemu_cpe *c);
void swemu_kernel_end(swemu_cpe *c);
int swemu_fault(swemu_cpe *c, uintptr_t a, int write);
void swemu_reprotect(swemu_cpe *c, size_t p0, size_t p1);
void swemu_describe_ldm(swemu_cpe *c, uintptr_t a, char *buf, size_t n);
void swemu_wait_reply(const char *op, volatile int *reply, int value, int exact);
void swemu_check_free(swemu_cpe *c, uintptr_t lo, uintptr_t hi);
void swemu_check_access(swemu_cpe *c, uintptr_t a, size_t n, int write);
/* timing.c: the modelled clock */
extern double swemu_host_cycles;
void swemu_time_dma(swemu_cpe *c, long len, long chunk, int width);
double swemu_sync_cycles(int scope);
double swemu_regcomm_latency(void);
double swemu_regcomm_message(void);
double swemu_spawn_cycles(void);
/* objects.c: bounds of the program's static and global arrays, from its symbol table */
extern size_t swemu_objects;
void swemu_objects_init(void);
void swemu_check_object(swemu_cpe *c, const char *op, uintptr_t lo, uintptr_t hi);
/* regcomm.c */
void swemu_rc_reset(void);
void swemu_rc_kernel_end(swemu_cpe *c);
int swemu_rc_waiting(void);
void swemu_mesh_lock(void);
void swemu_mesh_unlock(void);
void swemu_mesh_wait(swemu_cpe *c, const char *op, unsigned long *seen, double *since, int *spins);
void swemu_mesh_moved(int id);
int swemu_mesh_gone(int id);
/* rma.c (SW26010-Pro) */
void swemu_rma_reset(void);
void swemu_rma_kernel_end(swemu_cpe *c);
void swemu_rma_check_free(swemu_cpe *c, uintptr_t lo, uintptr_t hi);
double swemu_rma_latency(void);
double swemu_rma_bytes_per_cycle(void);
/* redzone.c */
void swemu_redzone_fill(swemu_cpe *c, const swemu_blk *b);
void swemu_redzone_check(swemu_cpe *c, const swemu_blk *b, const char *when, size_t bytes);
void swemu_redzones(swemu_cpe *c, const char *when, size_t bytes);
/* the emulator's own (unprotected) address of LDM byte p of any CPE's arena */
static inline void *swemu_em(void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (a >= swemu_ldm_lo && a < swemu_ldm_hi && swemu_alias) {
        uintptr_t i = (a - swemu_ldm_lo) / SWEMU_STRIDE, o = (a - swemu_ldm_lo) % SWEMU_STRIDE;
        return swemu_alias + i * SWEMU_ARENA + o;
    }
    return p;
}

#endif
