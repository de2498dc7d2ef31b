/* swemu_int.h - private state of the Athread emulator (not installed for user code). */
#ifndef SWEMU_INT_H
#define SWEMU_INT_H

#define _GNU_SOURCE
#include <pthread.h>
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

typedef struct { uintptr_t lo, hi; } swemu_range;
typedef struct { size_t off, size, req; } swemu_blk;

/* Counters aggregated per kernel name, in first-spawn order. */
typedef struct {
    char *name;
    uint64_t spawns, get_ops, get_bytes, put_ops, put_bytes, hist[SWEMU_HIST];
    uint64_t leaked, conflicts;
    size_t peak;
    double seconds;
    int warned;
} swemu_kstat;

typedef struct swemu_cpe {
    int id;
    char *ldm;                    /* this CPE's LDM arena (ldm_malloc heap) */
    uintptr_t region_lo;          /* start of this thread's stack mapping (guard zone) */
    uintptr_t stk_lo, stk_hi;     /* usable stack + TLS (= stack part of the LDM) */
    uintptr_t entry_sp;           /* stack pointer where kernels are entered */
    /* heap, first fit over blocks sorted by offset */
    swemu_blk *blk; int nblk, blk_cap;
    size_t heap_used, heap_peak;
    /* counters of the current spawn, owned by the CPE thread while it runs */
    uint64_t get_ops, get_bytes, put_ops, put_bytes, hist[SWEMU_HIST], leaked;
    /* main-memory ranges written by puts in the current spawn (conflict detection) */
    swemu_range *w; size_t nw, w_cap;
    volatile int state;           /* 0 idle, 1 running, 2 in a barrier, 3 returned */
    double t_done;                /* when it returned from the current kernel */
} swemu_cpe;

extern swemu_cpe swemu_cpes[SWEMU_CPES];
extern __thread swemu_cpe *swemu_self;
extern size_t swemu_static_ldm;   /* bytes of TLS (= __thread_local/__ldm data) */
extern uintptr_t swemu_ldm_lo, swemu_ldm_hi;  /* all arenas, one block */
extern uintptr_t swemu_stk_lo, swemu_stk_hi;  /* all CPE stack mappings, one block */
extern size_t swemu_stk_region;               /* bytes of one CPE's stack mapping */
extern int swemu_conflicts_on;

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
uint64_t swemu_conflicts(uintptr_t *first, int *a, int *b);   /* see dma.c */

#endif
