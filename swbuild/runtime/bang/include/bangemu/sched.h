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
#include <thread>

#include "core.h"

namespace bangemu {

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
  join_io(t);
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
  long long top = 0;
  for (auto& p : L.tasks)
    if (kind == 2 || p->cluster == t.cluster) top = std::max(top, p->clock);
  for (auto& p : L.tasks)
    if (kind == 2 || p->cluster == t.cluster) {
      p->clock = top + (kind == 1 ? BANGEMU_SYNC_CLUSTER_CYCLES : BANGEMU_SYNC_ALL_CYCLES);
      if (p->st == Task::BLOCKED && p->waiting == kind) { p->st = Task::READY; p->waiting = 0; }
    }
}

inline void run_task(Launch* L, Task* t, const std::function<void()>* fn) {
  {
    std::unique_lock<std::mutex> lk(L->m);
    t->cv.wait(lk, [&] { return t->go; });
  }
  (*fn)();
  join_io(*t);
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
/* Queue barriers: compute waits for the async copies, or the copies for compute. */
inline void __sync_io() { ::bangemu::join_io(::bangemu::cur()); }
inline void __sync_compute() { ::bangemu::Task& t = ::bangemu::cur(); t.io = std::max(t.io, t.clock); }

#endif
