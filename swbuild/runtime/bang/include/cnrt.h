/* bangemu host runtime: the part of CNRT a host program needs to run a kernel, plus the
 * launch that replaces `kernel<<<dim, type, queue>>>(args)` (g++ has no <<< >>>):
 *
 *   BANGEMU_LAUNCH(kernel, dim, cnrtFuncTypeUnion1, queue, args...);
 *
 * Launches run to completion before returning (the queue is accepted and ignored). */
#ifndef BANGEMU_CNRT_H
#define BANGEMU_CNRT_H

#include <type_traits>

#include "bangemu/sched.h"

typedef struct { unsigned int x, y, z; } cnrtDim3_t;
/* Values are the cores one job spans (as in CNRT): BLOCK = 1 core, UNIONn = n clusters. */
typedef enum {
  CNRT_FUNC_TYPE_BLOCK = 1, CNRT_FUNC_TYPE_UNION1 = 4, CNRT_FUNC_TYPE_UNION2 = 8,
  CNRT_FUNC_TYPE_UNION4 = 16, cnrtFuncTypeBlock = 1, cnrtFuncTypeUnion1 = 4,
  cnrtFuncTypeUnion2 = 8, cnrtFuncTypeUnion4 = 16
} cnrtFunctionType_t;
typedef enum { CNRT_RET_SUCCESS = 0, cnrtSuccess = 0, cnrtErrorArgsInvalid = 1 } cnrtRet_t;
typedef enum {
  CNRT_MEM_TRANS_DIR_HOST2DEV = 0, CNRT_MEM_TRANS_DIR_DEV2DEV = 1,
  CNRT_MEM_TRANS_DIR_DEV2HOST = 2, CNRT_MEM_TRANS_DIR_HOST2HOST = 3,
  cnrtMemcpyHostToDev = 0, cnrtMemcpyDevToDev = 1, cnrtMemcpyDevToHost = 2,
  cnrtMemcpyHostToHost = 3
} cnrtMemTransDir_t;
typedef struct bangemu_queue* cnrtQueue_t;
struct bangemu_queue { int unused; };

namespace bangemu {
/* The cnrtMalloc block holding p, or report `what` (host API misuse is fatal too). */
inline bool host_block(const char* fn, const char* what, const void* p, size_t n) {
  auto& b = S().gdram;
  auto it = b.upper_bound((uintptr_t)p);
  if (it != b.begin()) {
    --it;
    size_t off = (uintptr_t)p - it->first;
    if (off < it->second || (off == 0 && it->second == 0)) {
      if (off + n <= it->second) return true;
      return report(nullptr, -1, fn, fmt("%s must stay inside its cnrtMalloc block", what),
                    fmt("offset=%zu, bytes=%zu, block=%zu", off, n, it->second));
    }
  }
  return report(nullptr, -1, fn, fmt("%s must come from cnrtMalloc", what), fmt("%s=%p", what, p));
}
}  // namespace bangemu

inline cnrtRet_t cnrtInit(unsigned int) { return cnrtSuccess; }
inline void cnrtDestroy() {}
inline cnrtRet_t cnrtSetDevice(int) { return cnrtSuccess; }
inline cnrtRet_t cnrtGetDevice(int* d) { *d = 0; return cnrtSuccess; }
inline cnrtRet_t cnrtGetDeviceCount(unsigned int* n) { *n = 1; return cnrtSuccess; }
/* GDRAM blocks are 64-B aligned (so granule costs do not depend on malloc) and zeroed (so
 * runs are reproducible). */
inline cnrtRet_t cnrtMalloc(void** p, size_t n) {
  size_t r = (n + 63) / 64 * 64;
  *p = aligned_alloc(64, r ? r : 64);
  if (!*p) return cnrtErrorArgsInvalid;
  memset(*p, 0, r);
  bangemu::S().gdram[(uintptr_t)*p] = n;
  return cnrtSuccess;
}
inline cnrtRet_t cnrtFree(void* p) {
  if (!p) return cnrtSuccess;
  if (!bangemu::S().gdram.erase((uintptr_t)p))
    bangemu::report(nullptr, -1, "cnrtFree", "pointer must come from cnrtMalloc", bangemu::fmt("ptr=%p", p));
  free(p);
  return cnrtSuccess;
}
inline cnrtRet_t cnrtMemcpy(void* dst, void* src, size_t n, cnrtMemTransDir_t dir) {
  bool ok = true;
  if (dir == cnrtMemcpyHostToDev || dir == cnrtMemcpyDevToDev) ok = bangemu::host_block("cnrtMemcpy", "dst", dst, n);
  if (dir == cnrtMemcpyDevToHost || dir == cnrtMemcpyDevToDev) ok = bangemu::host_block("cnrtMemcpy", "src", src, n) && ok;
  if (ok && n) memmove(dst, src, n);
  return ok ? cnrtSuccess : cnrtErrorArgsInvalid;
}
inline cnrtRet_t cnrtMemset(void* p, int v, size_t n) {
  if (!bangemu::host_block("cnrtMemset", "ptr", p, n)) return cnrtErrorArgsInvalid;
  memset(p, v, n);
  return cnrtSuccess;
}
inline cnrtRet_t cnrtQueueCreate(cnrtQueue_t* q) { *q = new bangemu_queue(); return cnrtSuccess; }
inline cnrtRet_t cnrtQueueDestroy(cnrtQueue_t q) { delete q; return cnrtSuccess; }
inline cnrtRet_t cnrtQueueSync(cnrtQueue_t) { return cnrtSuccess; }
inline cnrtRet_t cnrtCreateQueue(cnrtQueue_t* q) { return cnrtQueueCreate(q); }
inline cnrtRet_t cnrtDestroyQueue(cnrtQueue_t q) { return cnrtQueueDestroy(q); }
inline cnrtRet_t cnrtSyncQueue(cnrtQueue_t q) { return cnrtQueueSync(q); }

/* Notifiers: the device's own clock, as CNRT times a queue.  Launches run to completion in
 * order, so a notifier placed on a queue reads the modelled device clock (the sum of the
 * launches' cycles so far, sched.h) and durations are cycles / BANGEMU_CLOCK_HZ (the
 * toolchain's clock_hz). */
#ifndef BANGEMU_CLOCK_HZ
#define BANGEMU_CLOCK_HZ 1.0e9
#endif
struct bangemu_notifier { long long cycles; bool placed; };
typedef struct bangemu_notifier* cnrtNotifier_t;
inline cnrtRet_t cnrtNotifierCreate(cnrtNotifier_t* n) { *n = new bangemu_notifier{0, false}; return cnrtSuccess; }
inline cnrtRet_t cnrtNotifierDestroy(cnrtNotifier_t n) { delete n; return cnrtSuccess; }
inline cnrtRet_t cnrtCreateNotifier(cnrtNotifier_t* n) { return cnrtNotifierCreate(n); }
inline cnrtRet_t cnrtDestroyNotifier(cnrtNotifier_t* n) { cnrtNotifierDestroy(*n); *n = nullptr; return cnrtSuccess; }
inline cnrtRet_t cnrtPlaceNotifier(cnrtNotifier_t n, cnrtQueue_t) {
  if (!n) return cnrtErrorArgsInvalid;
  n->cycles = bangemu::S().device_cycles;
  n->placed = true;
  return cnrtSuccess;
}
inline cnrtRet_t cnrtWaitNotifier(cnrtNotifier_t n) { return n && n->placed ? cnrtSuccess : cnrtErrorArgsInvalid; }
/* Microseconds between two placed notifiers (CNRT's cnrtNotifierDuration). */
inline cnrtRet_t cnrtNotifierDuration(cnrtNotifier_t start, cnrtNotifier_t end, float* us) {
  if (!start || !end || !start->placed || !end->placed || !us) return cnrtErrorArgsInvalid;
  *us = (float)((double)(end->cycles - start->cycles) / (double)BANGEMU_CLOCK_HZ * 1e6);
  return cnrtSuccess;
}
/* Milliseconds (the newer spelling, cnrtNotifierElapsedTime). */
inline cnrtRet_t cnrtNotifierElapsedTime(cnrtNotifier_t start, cnrtNotifier_t end, float* ms) {
  cnrtRet_t r = cnrtNotifierDuration(start, end, ms);
  if (r == cnrtSuccess) *ms /= 1000.0f;
  return r;
}

namespace bangemu {

/* Runs every task of one launch; `name` keys the counters. */
inline void run_launch(const char* name, cnrtDim3_t dim, cnrtFunctionType_t type,
                       const std::function<void()>& fn) {
  State& s = S();
  auto L = std::make_unique<Launch>();
  L->name = name;
  L->ks = &s.kernels[name];
  L->ks->launches++;
  L->dim[0] = dim.x; L->dim[1] = dim.y; L->dim[2] = dim.z;
  L->ntasks = (int)(dim.x * dim.y * dim.z);
  L->is_union = type != CNRT_FUNC_TYPE_BLOCK;
  s.launch = L.get();
  auto bad = [&](const std::string& rule, const std::string& values) {
    report(name, 0, "launch", rule, values, true);
  };
  if (type != 1 && type != 4 && type != 8 && type != 16)
    bad("function type must be BLOCK or UNION1/2/4", fmt("type=%d", (int)type));
  if (L->ntasks <= 0) bad("dim must be positive", fmt("dim=(%u,%u,%u)", dim.x, dim.y, dim.z));
  if (L->is_union && dim.x % BANGEMU_UNION_DIM_MULTIPLE != 0)
    bad(fmt("UNION needs dim.x %% %d == 0", BANGEMU_UNION_DIM_MULTIPLE), fmt("dim.x=%u", dim.x));
  if (L->is_union && L->ntasks % (int)type != 0)
    bad(fmt("UNION%d needs taskDim %% %d == 0", (int)type / 4, (int)type), fmt("taskDim=%d", L->ntasks));
  /* Capacity of what was declared: g++ lays every __nram__ variable of the program into one
   * section, so this is the sum over all kernels (share one arena between kernels). */
  static const char* qual[] = {"", "__nram__", "__wram__", "__mlu_shared__"};
  for (int sp = NRAM; sp <= SRAM; ++sp)
    if ((long long)declared(sp) > capacity(sp))
      report(name, 0, qual[sp], fmt("%s declarations must fit in %s", qual[sp], space_name(sp)),
             sp == WRAM ? fmt("declared=%zu B, capacity=%lld B", declared(sp), capacity(sp))
                        : fmt("declared=%zu B, capacity=%lld B = %d - %d reserved by cncc",
                              declared(sp), capacity(sp),
                              sp == NRAM ? BANGEMU_NRAM_BYTES : BANGEMU_SRAM_BYTES,
                              sp == NRAM ? BANGEMU_NRAM_RESERVE_BYTES : BANGEMU_SRAM_RESERVE_BYTES));
  L->core_dim = L->is_union ? BANGEMU_CORES_PER_CLUSTER : 1;
  L->cluster_dim = L->is_union ? L->ntasks / BANGEMU_CORES_PER_CLUSTER : 1;
  int nclusters = L->is_union ? L->cluster_dim : 1;
  L->sram.resize(nclusters);
  L->sram_valid.assign(nclusters, 0);
  L->arrived.assign(nclusters, 0);
  fill_redzones();   /* buffers.h: plain stores past a buffer change them */
  for (int i = 0; i < L->ntasks; ++i) {
    auto t = std::make_unique<Task>();
    t->id = i;
    t->phys = i % BANGEMU_CORES;
    t->cluster = L->is_union ? i / BANGEMU_CORES_PER_CLUSTER : 0;
    t->core = L->is_union ? i % BANGEMU_CORES_PER_CLUSTER : 0;
    L->tasks.push_back(std::move(t));
  }
  /* task threads on stacks of the kernel's stack room in NRAM + slack: sched.h */
  struct Arg { Launch* L; Task* t; const std::function<void()>* fn; };
  std::vector<pthread_t> threads;
  std::vector<Arg> args(L->tasks.size());
  size_t avail = (size_t)stack_room();
  for (size_t i = 0; i < L->tasks.size(); ++i) {
    Task* t = L->tasks[i].get();
    t->stack_size = (avail + STACK_SLACK + STACK_GUARD + 4095) & ~(size_t)4095;
    t->stack = (char*)mmap(nullptr, t->stack_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->stack == MAP_FAILED) report(name, t->id, "launch", "cannot map a task stack", "mmap", true);
    args[i] = Arg{L.get(), t, &fn};
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstack(&at, t->stack, t->stack_size);
    pthread_t th;
    if (pthread_create(&th, &at, [](void* p) -> void* {
          Arg* a = (Arg*)p;
          run_task(a->L, a->t, a->fn);
          return nullptr;
        }, &args[i]) != 0)
      report(name, t->id, "launch", "cannot start a task thread", "pthread_create", true);
    pthread_attr_destroy(&at);
    threads.push_back(th);
  }
  {
    std::unique_lock<std::mutex> lk(L->m);
    Task* first = L->tasks[0].get();
    L->sram_owner = first->cluster;
    first->st = Task::RUNNING;
    first->go = true;
    s.cur = first;
    first->cv.notify_one();
    L->done_cv.wait(lk, [&] { return L->finished; });
  }
  for (auto& th : threads) pthread_join(th, nullptr);
  for (auto& t : L->tasks) munmap(t->stack, t->stack_size);
  uintptr_t first = 0;
  int ta = 0, tb = 0;
  long long nc = write_conflicts(&first, &ta, &tb);
  sram_interval_end();
  L->ks->write_conflicts += nc;
  if (nc && !L->ks->warned) {
    L->ks->warned = true;
    fprintf(stderr, "bangemu: warning: kernel %s: %lld bytes of GDRAM written by more than one task "
            "between the same barriers, first at %s by task %d and %d\n", name, nc,
            gdram_where((const void*)first).c_str(), ta, tb);
  }
  /* Tasks beyond the 16 cores queue on them: a core's time is the sum of its tasks. */
  std::vector<long long> core(BANGEMU_CORES, 0);
  for (auto& t : L->tasks) core[t->phys] += t->clock;
  long long launch_cycles = *std::max_element(core.begin(), core.end()) + BANGEMU_LAUNCH_CYCLES;
  L->ks->cycles += launch_cycles;
  s.device_cycles += launch_cycles;
  s.cur = nullptr;
  s.launch = nullptr;
}

template <class... P, class... A>
inline void launch(const char* name, void (*kernel)(P...), cnrtDim3_t dim,
                   cnrtFunctionType_t type, cnrtQueue_t, A... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  // the compiler cuts merged launches at this many pointers (toolchain launch_max_pointer_args)
  static_assert((0 + ... + (std::is_pointer<P>::value ? 1 : 0)) <= BANGEMU_LAUNCH_MAX_POINTER_ARGS,
                "a launch takes more pointer arguments than launch_max_pointer_args allows");
  std::function<void()> fn = [=]() { kernel(args...); };
  run_launch(name, dim, type, fn);
}

}  // namespace bangemu

#define BANGEMU_LAUNCH(kernel, dim, type, queue, ...) \
  ::bangemu::launch(#kernel, kernel, dim, type, queue, ##__VA_ARGS__)

#endif
