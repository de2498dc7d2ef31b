/* bangemu scheduler: tasks of a launch as threads that run one at a time.
 *
 * Why one at a time: the on-chip spaces are single sections at fixed addresses (core.h),
 * so only one core's NRAM/WRAM and one cluster's SRAM can be "live". A task runs until it
 * returns or waits at a barrier; only then does the scheduler save its sections, restore
 * the next task's and hand over. Kernels without barriers therefore never copy memory.
 * Results, counters and cycles do not depend on host thread timing. */
#ifndef BANGEMU_SCHED_H
#define BANGEMU_SCHED_H

#include <functional>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <thread>

#include "buffers.h"

namespace bangemu {

inline void sram_interval_end();   /* sram2sram.h */

inline void copy_out(int s, std::vector<char>& buf) {
  Region r = region(s);
  buf.assign(r.lo, r.hi);
}
inline void copy_in(int s, const std::vector<char>& buf) {
  Region r = region(s);
  if (!buf.empty()) memcpy(r.lo, buf.data(), buf.size());
}

inline bool cluster_alive(Launch& L, int c) {
  for (auto& t : L.tasks)
    if (t->cluster == c && t->st != Task::DONE) return true;
  return false;
}

/* Make cluster c's SRAM contents live (lock held). */
inline void switch_sram(Launch& L, int c) {
  if (L.sram_owner == c || declared(SRAM) == 0) { L.sram_owner = c; return; }
  int o = L.sram_owner;
  if (o >= 0 && cluster_alive(L, o)) { copy_out(SRAM, L.sram[o]); L.sram_valid[o] = 1; }
  if (L.sram_valid[c]) copy_in(SRAM, L.sram[c]);
  L.sram_owner = c;
}

/* Barrier that can never complete: fatal whatever BANGEMU_ON_VIOLATION says. */
[[noreturn]] inline void deadlock(Launch& L) {
  for (auto& t : L.tasks)
    if (t->st == Task::BLOCKED) {
      const char* fn = t->waiting == 1 ? "__sync_cluster" : "__sync_all";
      report(L.name.c_str(), t->id, fn, "every task of the barrier must reach it",
             fmt("%d of %d tasks finished without reaching it", L.ndone, L.ntasks), true);
    }
  die();
}

/* `from` is BLOCKED or DONE: pick the next runnable task, preferring from's cluster (keeps
 * SRAM live), and wake it (lock held). */
inline void hand_over(Launch& L, Task* from) {
  Task* next = nullptr;
  for (int pass = 0; pass < 2 && !next; ++pass)
    for (auto& t : L.tasks)
      if ((t->st == Task::NEW || t->st == Task::READY) && (pass || t->cluster == from->cluster)) {
        next = t.get();
        break;
      }
  if (!next) {
    if (L.ndone < L.ntasks) deadlock(L);
    L.finished = true;
    S().cur = nullptr;
    L.done_cv.notify_all();
    return;
  }
  if (from->st == Task::BLOCKED) {
    copy_out(NRAM, from->nram);
    copy_out(WRAM, from->wram);
    from->saved = true;
  }
  switch_sram(L, next->cluster);
  if (next->saved) {
    copy_in(NRAM, next->nram);
    copy_in(WRAM, next->wram);
    next->saved = false;
  }
  next->st = Task::RUNNING;
  next->go = true;
  S().cur = next;
  next->cv.notify_one();
}

/* kind 1: the task's cluster (__sync_cluster); kind 2: every task (__sync_all). The last
 * task to arrive aligns the participants' clocks (they waited for the slowest) and goes on. */
inline void barrier(int kind) {
  const char* fn = kind == 1 ? "__sync_cluster" : "__sync_all";
  Launch& L = launch_();
  Task& t = cur();
  if (!L.is_union) {
    violation(fn, "barriers need a UNION launch", "type=BLOCK");
    return;
  }
  if (kind == 2 && L.ntasks > BANGEMU_CORES) {
    violation(fn, "every task must be resident", fmt("taskDim=%d > %d cores", L.ntasks, BANGEMU_CORES));
    return;
  }
  S().launch->ks->instr[kind == 1 ? OP_SYNC_CLUSTER : OP_SYNC_ALL]++;
  check_redzones(fn);
  land_async(t);
  join_all(t);
  std::unique_lock<std::mutex> lk(L.m);
  int& count = kind == 1 ? L.arrived[t.cluster] : L.arrived_all;
  int need = kind == 1 ? L.core_dim : L.ntasks;
  if (++count < need) {
    t.waiting = kind;
    t.st = Task::BLOCKED;
    t.go = false;
    hand_over(L, &t);
    t.cv.wait(lk, [&] { return t.go; });
    return;
  }
  count = 0;
  if (kind == 2) {
    epoch_all()++;   /* orders GDRAM writes for the conflict check */
    sram_interval_end();
  } else {
    auto& ec = epoch_cluster();
    if ((int)ec.size() <= t.cluster) ec.resize(t.cluster + 1, 0);
    ec[t.cluster]++;
  }
  long long top = 0;
  for (auto& p : L.tasks)
    if (kind == 2 || p->cluster == t.cluster) top = std::max(top, p->clock);
  for (auto& p : L.tasks)
    if (kind == 2 || p->cluster == t.cluster) {
      p->clock = top + (kind == 1 ? BANGEMU_SYNC_CLUSTER_CYCLES : BANGEMU_SYNC_ALL_CYCLES);
      if (p->st == Task::BLOCKED && p->waiting == kind) { p->st = Task::READY; p->waiting = 0; }
    }
}

/* ---- the stack lives in NRAM: a task's frames and local arrays share it with the
 * __nram__ declarations. On the chip cncc keeps nram_reserve_bytes of NRAM back from the
 * declarations for its own use, the stack (Cambricon's mlu-ops, kernels/kernel.h:
 * REM_FOR_STACK, "128KB reserved for cncc"), so a kernel's stack has that reserve plus what
 * the declarations leave of the capacity: stack_room() = nram_bytes - declared. Each task
 * thread runs on its own mapping whose pages below stack_room() + EMU_FRAMES under the
 * task's entry frame are inaccessible; a fault there is reported instead of a bare SIGSEGV.
 * EMU_FRAMES is the emulator's own: intrinsics are C++ functions here (single instructions
 * on the chip) and must not be charged to the kernel. */
constexpr size_t STACK_SLACK = 256 << 10;   // the mapping's room for the emulator's frames, and alignment
constexpr size_t EMU_FRAMES = 16 << 10;     // of it, what the guard allows below the kernel's stack_room()
constexpr size_t STACK_GUARD = 64 << 20;    // below: local arrays up to 64 MB fault here
inline long long stack_room() { return std::max(0LL, (long long)BANGEMU_NRAM_BYTES - (long long)declared(NRAM)); }
inline thread_local Task* self_task = nullptr;

inline void on_stack_fault(int sig, siginfo_t* si, void*) {
  Task* t = self_task;
  uintptr_t a = (uintptr_t)si->si_addr;
  if (t && a >= (uintptr_t)t->stack && a < t->stack_limit && S().launch) {
    fprintf(stderr, "bangemu: error: kernel %s task %d: stack: the kernel's frames and local arrays live in NRAM "
            "and need more than the %lld B it has there (nram_bytes=%d B - declared=%zu B of __nram__ "
            "declarations, cncc's stack reserve nram_reserve_bytes=%d B included; the emulator's own frames "
            "are not charged)\n", S().launch->name.c_str(), t->id, stack_room(), BANGEMU_NRAM_BYTES,
            declared(NRAM), BANGEMU_NRAM_RESERVE_BYTES);
    fflush(stderr);
    _exit(87);
  }
  signal(sig, SIG_DFL);   // anything else: die as usual
}

inline void stack_guard(Task* t) {
  static bool installed = [] {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stack_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    return true;
  }();
  (void)installed;
  static thread_local std::vector<char> alt(1 << 16);
  stack_t ss = {};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  self_task = t;
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  uintptr_t lim = (sp - (uintptr_t)stack_room() - EMU_FRAMES) & ~(uintptr_t)4095;
  if (lim > (uintptr_t)t->stack) {
    mprotect(t->stack, lim - (uintptr_t)t->stack, PROT_NONE);
    t->stack_limit = lim;
  }
}

inline void run_task(Launch* L, Task* t, const std::function<void()>* fn) {
  stack_guard(t);
  {
    std::unique_lock<std::mutex> lk(L->m);
    t->cv.wait(lk, [&] { return t->go; });
  }
  (*fn)();
  check_redzones("kernel end");
  auto fl = in_flight().find(t);
  if (fl != in_flight().end() && !fl->second.empty())
    violation("__memcpy_async", "every copy must be completed by __sync_io before the kernel ends",
              fmt("%zu copies in flight, the first #%d %s", fl->second.size(), fl->second[0].seq,
                  dir_name(fl->second[0].dir)));
  land_async(*t);
  join_all(*t);
  std::unique_lock<std::mutex> lk(L->m);
  t->st = Task::DONE;
  L->ndone++;
  hand_over(*L, t);
}

}  // namespace bangemu

/* Built-in variables of BANG C. */
#define taskDim (::bangemu::launch_().ntasks)
#define taskId (::bangemu::cur().id)
#define taskDimX ((int)::bangemu::launch_().dim[0])
#define taskDimY ((int)::bangemu::launch_().dim[1])
#define taskDimZ ((int)::bangemu::launch_().dim[2])
#define taskIdX (taskId % taskDimX)
#define taskIdY (taskId / taskDimX % taskDimY)
#define taskIdZ (taskId / (taskDimX * taskDimY))
#define coreId (::bangemu::cur().core)
#define coreDim (::bangemu::launch_().core_dim)
#define clusterId (::bangemu::cur().cluster)
#define clusterDim (::bangemu::launch_().cluster_dim)

inline void __sync_cluster() { ::bangemu::barrier(1); }
inline void __sync_all() { ::bangemu::barrier(2); }
/* Queue barriers: issue waits for the copies of the IO queue (which land), the move queue,
 * the compute queue, or all three. */
inline void __sync_io() {
  ::bangemu::check_redzones("__sync_io");
  ::bangemu::land_async(::bangemu::cur(), ::bangemu::LAND_IO);
  ::bangemu::join_io(::bangemu::cur());
}
inline void __sync_move() {
  ::bangemu::check_redzones("__sync_move");
  ::bangemu::land_async(::bangemu::cur(), ::bangemu::LAND_MOVE);
  ::bangemu::join_move(::bangemu::cur());
}
inline void __sync_compute() { ::bangemu::join_compute(::bangemu::cur()); }
inline void __sync_io_move_compute() {
  ::bangemu::check_redzones("__sync_io_move_compute");
  ::bangemu::land_async(::bangemu::cur(), ::bangemu::LAND_ALL);
  ::bangemu::join_all(::bangemu::cur());
}

#endif
