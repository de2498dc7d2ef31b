/* core.c - CPE thread pool, spawn/join/halt, fatal errors, faults.
 *
 * Each CPE is a persistent POSIX thread whose stack is carved out of one mapping so the
 * emulator knows where "LDM" (stack + TLS) lives; a PROT_NONE guard below
 * (LDM capacity - static LDM data) makes a kernel whose local arrays would not fit the
 * real LDM fault, and the fault handler reports it as an LDM overflow.
 */
#include "swemu_int.h"

#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

swemu_cpe swemu_cpes[SWEMU_CPES];
__thread swemu_cpe *swemu_self;
__thread int swemu_tid = -1;
size_t swemu_static_ldm;
uintptr_t swemu_ldm_lo, swemu_ldm_hi, swemu_stk_lo, swemu_stk_hi;
size_t swemu_stk_region;
int swemu_conflicts_on = 1;

/* Spawn/join and barriers wait on futexes: 64 threads on a few cores must not stampede
 * on one mutex (a condvar pool cost ~1 ms per spawn). */
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;   /* init handshake only */
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static int gen;                   /* bumped by each spawn; workers wait on it */
static int running;               /* CPEs still in the kernel; join waits on it */
static int ready, inited, halted, dirty, written;
static void (*cur_fn)(void *);
static void *cur_arg;
static swemu_kstat *cur_k;        /* kernel spawned and not yet joined */
static double t0, timeout_s;

long swemu_futex(int *addr, int op, int val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *swemu_kernel(void) { return cur_k ? cur_k->name : "(none)"; }

/* One line on stderr, written with a single write() so 64 failing CPEs cannot interleave;
 * only the first failing thread reports. */
void swemu_die(swemu_cpe *c, const char *fmt, ...)
{
    static int dying;
    char buf[1024];
    int n;
    va_list ap;
    if (__atomic_exchange_n(&dying, 1, __ATOMIC_SEQ_CST))
        for (;;) pause();
    n = c ? snprintf(buf, sizeof buf, "swemu: error: kernel %s CPE %d: ", swemu_kernel(), c->id)
          : snprintf(buf, sizeof buf, "swemu: error: ");
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    n = strlen(buf);
    buf[n++] = '\n';
    if (write(2, buf, n) < 0) { /* nothing left to report to */ }
    _exit(SWEMU_EXIT);
}

swemu_cpe *swemu_need_cpe(const char *op)
{
    swemu_cpe *c = swemu_self;
    if (!c) swemu_die(NULL, "%s called outside a CPE kernel (on the host thread)", op);
    return c;
}

void swemu_simd_misaligned(const void *p, unsigned long align, const char *op)
{
    swemu_die(swemu_need_cpe(op), "%s: address %p is not %lu-byte aligned", op, p, align);
}

/* ---- faults: stack past the LDM guard = LDM overflow; anything else is named, then
 * re-raised with the previous handler so the process dies as usual. ---- */
static struct sigaction old_segv, old_bus;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    swemu_cpe *c = swemu_self;
    uintptr_t a = (uintptr_t)si->si_addr;
    int wr = 0;
#if defined(__x86_64__)
    wr = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
#endif
    if (c && a >= c->region_lo && a < c->stk_lo)
        swemu_die(c, "LDM overflow: stack grew past %zu bytes (local arrays too large?): "
                  "heap %zu, static LDM data %zu bytes, capacity %d bytes",
                  (size_t)(c->entry_sp - a), c->heap_used, swemu_static_ldm, SWEMU_LDM_BYTES);
    if (c && c->copying && !(a >= swemu_ldm_lo && a < swemu_ldm_hi))
        swemu_die(c, "%s: main memory %#lx is not mapped: the DMA's main-memory side lies "
                  "outside every array", c->copying, (unsigned long)a);
    /* LDM pages protected on purpose: DMA in flight, above the heap, guard, other CPEs */
    if (c && sig == SIGSEGV && swemu_fault(c, a, wr)) return;
    if (c && sig == SIGSEGV && si->si_code == SI_KERNEL)   /* #GP: no address reported */
        swemu_die(c, "general-protection fault at pc %#lx: a misaligned vector access (a vector "
                  "pointer not aligned to the vector's size, e.g. *(floatv4 *)(b + 1))?",
#if defined(__x86_64__)
                  (unsigned long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP]
#else
                  0ul
#endif
                  );
    if (c) {
        char buf[256];
        int n = snprintf(buf, sizeof buf, "swemu: error: kernel %s CPE %d: %s at address %p\n",
                         swemu_kernel(), c->id, sig == SIGSEGV ? "segmentation fault" : "bus error",
                         si->si_addr);
        if (write(2, buf, n) < 0) { /* ignore */ }
    }
    sigaction(sig, sig == SIGSEGV ? &old_segv : &old_bus, NULL);
}

/* ---- the CPE threads ---- */
static void kernel_done(swemu_cpe *c)
{
    swemu_kernel_end(c);   /* DMA never waited for */
    swemu_redzones(c, "kernel end", SIZE_MAX);
    swemu_rma_kernel_end(c);  /* RMA into or out of its LDM not waited for */
    swemu_rc_kernel_end(c);   /* messages nobody took */
    swemu_heap_reset(c);   /* LDM does not survive the kernel; leaks are counted */
    swemu_bar_leave(c);
}

static void *worker(void *p)
{
    swemu_cpe *c = p;
    int seen = 0;
    size_t page = sysconf(_SC_PAGESIZE);
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    uintptr_t g;
    swemu_self = c;
    swemu_tid = c->id;
    sigaltstack(&ss, NULL);
    swemu_async_thread(c);
    /* Kernels are called from this frame: the LDM's stack share ends (capacity - static
     * data) below it.  Everything lower is made inaccessible. */
    c->entry_sp = (uintptr_t)__builtin_frame_address(0);
    g = (c->entry_sp - (SWEMU_LDM_BYTES - swemu_static_ldm)) & ~(uintptr_t)(page - 1);
    if (g > c->stk_lo) {
        mprotect((void *)c->stk_lo, g - c->stk_lo, PROT_NONE);
        c->stk_lo = g;
    }
    c->stk_floor = c->stk_lo;
    pthread_mutex_lock(&pm);
    ready++;
    pthread_cond_broadcast(&ready_cv);
    pthread_mutex_unlock(&pm);
    for (;;) {
        while (swemu_load(&gen) == seen) swemu_futex(&gen, FUTEX_WAIT, seen, NULL);
        seen = swemu_load(&gen);    /* acquire: cur_fn, cur_arg, counters reset are visible */
        c->state = 1;
        cur_fn(cur_arg);
        kernel_done(c);
        c->state = 3;
        c->t_done = now();
        if (__atomic_sub_fetch(&running, 1, __ATOMIC_ACQ_REL) == 0)
            swemu_futex(&running, FUTEX_WAKE, 1, NULL);
    }
    return NULL;
}

static int tls_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS) *(size_t *)data = info->dlpi_phdr[i].p_memsz;
    return 1;   /* the first object is the program itself, where slave TLS lives */
}

static void stats_at_exit(void);

int athread_init(void)
{
    size_t page = sysconf(_SC_PAGESIZE), guard = 4u << 20, usable;
    char *base;
    const char *e;
    sigset_t all, old;
    struct sigaction sa;
    if (inited) { halted = 0; return 0; }
    if ((e = getenv("SWEMU_CONFLICTS")) && !strcmp(e, "0")) swemu_conflicts_on = 0;
    if ((e = getenv("SWEMU_TIMEOUT"))) timeout_s = atof(e);
    dl_iterate_phdr(tls_cb, &swemu_static_ldm);
    swemu_objects_init();
    if (swemu_static_ldm >= SWEMU_LDM_BYTES)
        swemu_die(NULL, "LDM overflow: static LDM data (__thread_local/__ldm variables) is %zu "
                  "bytes, capacity %d bytes", swemu_static_ldm, SWEMU_LDM_BYTES);
    /* All LDM arenas in one block, all stacks in one mapping: one range test each tells
     * whether a "main-memory" address is really LDM. */
    swemu_async_init();
    /* The arenas live in one memfd mapped twice: the CPEs' view (one arena per CPE, an
     * inaccessible page after each, pages protected while DMA is in flight or above the
     * heap) and the emulator's view (swemu_alias, always writable) that DMA lands through. */
    {
        size_t bytes = (size_t)SWEMU_CPES * SWEMU_ARENA;
        int fd = memfd_create("swemu-ldm", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, bytes))
            swemu_die(NULL, "cannot allocate %d LDM arenas: %s", SWEMU_CPES, strerror(errno));
        swemu_alias = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        base = mmap(NULL, SWEMU_CPES * SWEMU_STRIDE, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (swemu_alias == MAP_FAILED || base == MAP_FAILED)
            swemu_die(NULL, "cannot map LDM arenas: %s", strerror(errno));
        for (int i = 0; i < SWEMU_CPES; i++)
            if (mmap(base + i * SWEMU_STRIDE, SWEMU_ARENA, PROT_NONE, MAP_SHARED | MAP_FIXED,
                     fd, (off_t)i * SWEMU_ARENA) == MAP_FAILED)
                swemu_die(NULL, "cannot map LDM arenas: %s", strerror(errno));
        close(fd);
        memset(swemu_alias, 0xA5, bytes);   /* LDM starts as garbage */
    }
    swemu_ldm_lo = (uintptr_t)base;
    swemu_ldm_hi = swemu_ldm_lo + SWEMU_CPES * SWEMU_STRIDE;
    usable = (swemu_static_ldm + SWEMU_LDM_BYTES + (512u << 10) + page - 1) & ~(page - 1);
    swemu_stk_region = guard + usable;
    base = mmap(NULL, SWEMU_CPES * swemu_stk_region, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) swemu_die(NULL, "cannot map CPE stacks: %s", strerror(errno));
    swemu_stk_lo = (uintptr_t)base;
    swemu_stk_hi = swemu_stk_lo + SWEMU_CPES * swemu_stk_region;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaddset(&sa.sa_mask, SWEMU_SPIN_SIG);   /* the spin timer must not land meanwhile */
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    /* CPE threads take no asynchronous signals (SIGINT etc. stay with the host). */
    sigfillset(&all);
    sigdelset(&all, SIGSEGV); sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE); sigdelset(&all, SIGILL); sigdelset(&all, SIGABRT);
    sigdelset(&all, SWEMU_SPIN_SIG);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < SWEMU_CPES; i++) {
        swemu_cpe *c = &swemu_cpes[i];
        pthread_attr_t at;
        pthread_t th;
        c->id = i;
        c->ldm = (char *)swemu_ldm_lo + i * SWEMU_STRIDE;   /* all pages PROT_NONE: heap empty */
        c->region_lo = swemu_stk_lo + i * swemu_stk_region;
        c->stk_lo = c->region_lo + guard;
        c->stk_hi = c->region_lo + swemu_stk_region;
        if (mprotect((void *)c->stk_lo, usable, PROT_READ | PROT_WRITE))
            swemu_die(NULL, "cannot map CPE stacks: %s", strerror(errno));
        pthread_attr_init(&at);
        pthread_attr_setstack(&at, (void *)c->stk_lo, usable);
        if (pthread_create(&th, &at, worker, c))
            swemu_die(NULL, "cannot create CPE thread %d", i);
        pthread_detach(th);
        pthread_attr_destroy(&at);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_lock(&pm);
    while (ready < SWEMU_CPES) pthread_cond_wait(&ready_cv, &pm);
    pthread_mutex_unlock(&pm);
    atexit(stats_at_exit);
    inited = 1;
    return 0;
}

/* ---- spawn / join / halt ---- */
int swemu_spawn(void *fn, void *arg, const char *name)
{
    if (!inited) swemu_die(NULL, "athread_spawn(%s) before athread_init()", name);
    if (halted)
        swemu_die(NULL, "athread_spawn(%s) after athread_halt() (call athread_init() again first)", name);
    if (cur_k)
        swemu_die(NULL, "athread_spawn(%s) while kernel %s is still running (missing athread_join)",
                  name, cur_k->name);
    cur_k = swemu_kernel_stat(name);
    cur_k->spawns++;
    for (int i = 0; i < SWEMU_CPES; i++) {
        swemu_cpe *c = &swemu_cpes[i];
        c->get_ops = c->get_bytes = c->put_ops = c->put_bytes = c->leaked = 0;
        c->rc_puts[0] = c->rc_puts[1] = c->rc_gets[0] = c->rc_gets[1] = 0;
        memset(c->rma_ops, 0, sizeof c->rma_ops);
        c->rma_bytes = c->rma_recv_bytes = 0;
        memset(c->hist, 0, sizeof c->hist);
        c->heap_peak = 0;
        c->nw = c->nr = 0;
        swemu_clock_reset(c);
        c->cycles = swemu_host_cycles + swemu_spawn_cycles();
        c->state = 0;
    }
    swemu_bar_reset();
    swemu_rc_reset();
    swemu_rma_reset();
    cur_fn = (void (*)(void *))fn;
    cur_arg = arg;
    running = SWEMU_CPES;
    dirty = 1;
    t0 = now();
    __atomic_add_fetch(&gen, 1, __ATOMIC_RELEASE);
    swemu_futex(&gen, FUTEX_WAKE, INT_MAX, NULL);
    return 0;
}

#ifdef SWEMU_API_CRTS
int __real_athread_spawn(void *fn, void *arg, int flag) { (void)flag; return swemu_spawn(fn, arg, "unnamed"); }
#else
int __real_athread_spawn(void *fn, void *arg) { return swemu_spawn(fn, arg, "unnamed"); }
#endif

static void join_timed_out(void)
{
    int run = 0, bar = 0, rc = swemu_rc_waiting();
    for (int i = 0; i < SWEMU_CPES; i++) {
        run += swemu_cpes[i].state == 1;
        bar += swemu_cpes[i].state == 2;
    }
    swemu_die(NULL, "kernel %s: still running after SWEMU_TIMEOUT=%g s (%d CPEs computing, of them %d "
              "in register communication, %d waiting in a barrier): deadlock, or a wait for a DMA "
              "reply that never comes?", cur_k->name, timeout_s, run, rc, bar);
}

int athread_join(void)
{
    swemu_kstat *k = cur_k;
    double deadline = now() + timeout_s, t_end = t0;
    int r;
    if (!k) return 0;
    while ((r = swemu_load(&running)) != 0) {
        if (timeout_s > 0) {
            double left = deadline - now();
            struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
            if (left <= 0) join_timed_out();
            swemu_futex(&running, FUTEX_WAIT, r, &ts);
        } else {
            swemu_futex(&running, FUTEX_WAIT, r, NULL);
        }
    }
    for (int i = 0; i < SWEMU_CPES; i++) {
        swemu_cpe *c = &swemu_cpes[i];
        k->get_ops += c->get_ops; k->get_bytes += c->get_bytes;
        k->put_ops += c->put_ops; k->put_bytes += c->put_bytes;
        for (int b = 0; b < SWEMU_HIST; b++) k->hist[b] += c->hist[b];
        k->leaked += c->leaked;
        for (int d = 0; d < 2; d++) { k->rc_puts[d] += c->rc_puts[d]; k->rc_gets[d] += c->rc_gets[d]; }
        for (int f = 0; f < 5; f++) k->rma_ops[f] += c->rma_ops[f];
        k->rma_bytes += c->rma_bytes;
        k->rma_recv_bytes += c->rma_recv_bytes;
        if (c->heap_peak > k->peak) k->peak = c->heap_peak;
        if (c->t_done > t_end) t_end = c->t_done;
        if (c->cycles > swemu_host_cycles) swemu_host_cycles = c->cycles;
    }
    if (swemu_conflicts_on) {
        uintptr_t first = 0;
        int a = 0, b = 0;
        char nm[160];
        uint64_t n = swemu_conflicts(&first, &a, &b);
        k->conflicts += n;
        if (n && !k->warned) {
            k->warned = 1;
            swemu_name_of(first, nm, sizeof nm);
            fprintf(stderr, "swemu: warning: kernel %s: %llu write conflicts, first at %#lx%s by CPE %d and %d\n",
                    k->name, (unsigned long long)n, (unsigned long)first, nm, a, b);
        }
        n = swemu_races(&first, &a, &b);
        k->races += n;
        if (n && !k->race_warned) {
            k->race_warned = 1;
            swemu_name_of(first, nm, sizeof nm);
            fprintf(stderr, "swemu: warning: kernel %s: race: %llu bytes read by one CPE and written "
                    "by another with no barrier between, first at %#lx%s read by CPE %d, written by "
                    "CPE %d\n", k->name, (unsigned long long)n, (unsigned long)first, nm, a, b);
        }
    }
    k->seconds += t_end - t0;
    cur_k = NULL;
    return 0;
}

int athread_halt(void)
{
    if (cur_k) athread_join();
    swemu_write_stats();
    dirty = 0;
    written = 1;
#ifndef SWEMU_API_CRTS
    if (inited) halted = 1;   /* v1: the CPEs are released; CRTS: halt is a no-op */
#endif
    return 0;
}

static void stats_at_exit(void)
{
    if (dirty || !written) swemu_write_stats();
}
