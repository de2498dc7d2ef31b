/* bangemu core: qualifiers, memory spaces, counters and rule reporting.
 *
 * Why named sections: g++ cannot give a pointer an address space, so the space of an
 * operand is read from its address. `__nram__`, `__wram__` and `__mlu_shared__` put the
 * variable into the ELF sections bangemu_nram / bangemu_wram / bangemu_sram; the linker's
 * __start_/__stop_ symbols bound each space. Tasks run one at a time (sched.h) and the
 * scheduler swaps those sections' contents, so every core sees its own NRAM/WRAM and every
 * cluster its own SRAM at the same addresses, as on the chip. */
#ifndef BANGEMU_CORE_H
#define BANGEMU_CORE_H

#include <algorithm>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <unistd.h>

#include "config.h"

#define __mlu_global__
#define __mlu_entry__
#define __mlu_func__
#define __mlu_device__
#define __mlu_host__
/* `static` is what lets g++ honour the section inside a function. Not supported: these
 * qualifiers inside templates or inline functions (g++ drops or rejects the section
 * there), `static`/`extern` spelled next to them, and initialisers.
 * Each declaration is preceded by a 64-B redzone (`bangemu_redzone_N`, filled with a
 * pattern and verified, buffers.h); `no_reorder` keeps redzone and buffer in declaration
 * order, so every buffer is followed by the next one's redzone.  Redzones are not counted
 * in declared bytes, offsets or alignment. */
#define BANGEMU_CAT2(a, b) a##b
#define BANGEMU_CAT(a, b) BANGEMU_CAT2(a, b)
#define BANGEMU_ONCHIP(sec)                                                                 \
  static __attribute__((section(sec), aligned(64), used, no_reorder))                       \
  unsigned char BANGEMU_CAT(bangemu_redzone_, __COUNTER__)[BANGEMU_REDZONE_BYTES];          \
  static __attribute__((section(sec), aligned(64), no_reorder))
#define BANGEMU_REDZONE_BYTES 64
#define __nram__ BANGEMU_ONCHIP("bangemu_nram")
#define __wram__ BANGEMU_ONCHIP("bangemu_wram")
#define __mlu_shared__ BANGEMU_ONCHIP("bangemu_sram")
#define __BANGEMU__ 1

extern "C" {
extern char __start_bangemu_nram[] __attribute__((weak, visibility("hidden")));
extern char __stop_bangemu_nram[] __attribute__((weak, visibility("hidden")));
extern char __start_bangemu_wram[] __attribute__((weak, visibility("hidden")));
extern char __stop_bangemu_wram[] __attribute__((weak, visibility("hidden")));
extern char __start_bangemu_sram[] __attribute__((weak, visibility("hidden")));
extern char __stop_bangemu_sram[] __attribute__((weak, visibility("hidden")));
extern char __start_bangemu_tail[] __attribute__((weak, visibility("hidden")));
extern char __stop_bangemu_tail[] __attribute__((weak, visibility("hidden")));
}
/* Every translation unit opens each on-chip section with a redzone and puts one into
 * bangemu_tail, which the linker lays after them: the last buffer of a space is then
 * followed by the next section's redzone (buffers.h checks across adjacent sections). */
static __attribute__((section("bangemu_nram"), aligned(64), used, no_reorder))
unsigned char bangemu_redzone_nram[BANGEMU_REDZONE_BYTES];
static __attribute__((section("bangemu_wram"), aligned(64), used, no_reorder))
unsigned char bangemu_redzone_wram[BANGEMU_REDZONE_BYTES];
static __attribute__((section("bangemu_sram"), aligned(64), used, no_reorder))
unsigned char bangemu_redzone_sram[BANGEMU_REDZONE_BYTES];
static __attribute__((section("bangemu_tail"), aligned(64), used, no_reorder))
unsigned char bangemu_redzone_tail[BANGEMU_REDZONE_BYTES];

typedef int8_t int8;
typedef int16_t int16;

/* Copy directions of __memcpy (the BANG enumerator names). */
typedef enum {
  GDRAM2NRAM, NRAM2GDRAM, GDRAM2WRAM, WRAM2GDRAM, GDRAM2SRAM, SRAM2GDRAM, NRAM2NRAM,
  NRAM2WRAM, WRAM2NRAM, NRAM2SRAM, SRAM2NRAM, SRAM2WRAM, WRAM2SRAM, SRAM2SRAM, GDRAM2GDRAM,
  BANGEMU_DIRECTIONS
} mluMemcpyDirection_t;

namespace bangemu {

enum Space { GDRAM, NRAM, WRAM, SRAM };
inline const char* space_name(int s) {
  static const char* n[] = {"GDRAM", "NRAM", "WRAM", "SRAM"};
  return n[s];
}
struct Region { char* lo; char* hi; };
inline Region region(int s) {
  switch (s) {
    case NRAM: return {__start_bangemu_nram, __stop_bangemu_nram};
    case WRAM: return {__start_bangemu_wram, __stop_bangemu_wram};
    case SRAM: return {__start_bangemu_sram, __stop_bangemu_sram};
  }
  return {nullptr, nullptr};
}
/* buffers.h: redzone bytes in space s, and p's offset from the space's start without them */
inline long long redzone_bytes(int s);
inline long long offset_of(int s, const void* p);
inline size_t declared(int s) { Region r = region(s); return (size_t)(r.hi - r.lo - redzone_bytes(s)); }
/* Usable bytes: what cncc leaves to the program. */
inline long long capacity(int s) {
  switch (s) {
    case NRAM: return (long long)BANGEMU_NRAM_BYTES - BANGEMU_NRAM_RESERVE_BYTES;
    case WRAM: return BANGEMU_WRAM_BYTES;
    case SRAM: return (long long)BANGEMU_SRAM_BYTES - BANGEMU_SRAM_RESERVE_BYTES;
  }
  return 0;
}
/* Everything outside the three on-chip sections is off-chip memory (GDRAM). */
inline int space_of(const void* p) {
  for (int s = NRAM; s <= SRAM; ++s) {
    Region r = region(s);
    if ((const char*)p >= r.lo && (const char*)p < r.hi) return s;
  }
  return GDRAM;
}
inline const char* dir_name(int d) {
  static const char* n[] = {"GDRAM2NRAM", "NRAM2GDRAM", "GDRAM2WRAM", "WRAM2GDRAM",
                            "GDRAM2SRAM", "SRAM2GDRAM", "NRAM2NRAM", "NRAM2WRAM",
                            "WRAM2NRAM", "NRAM2SRAM", "SRAM2NRAM", "SRAM2WRAM",
                            "WRAM2SRAM", "SRAM2SRAM", "GDRAM2GDRAM"};
  return d >= 0 && d < BANGEMU_DIRECTIONS ? n[d] : "?";
}
inline void dir_spaces(int d, int* src, int* dst) {
  static const int s[][2] = {{GDRAM, NRAM}, {NRAM, GDRAM}, {GDRAM, WRAM}, {WRAM, GDRAM},
                             {GDRAM, SRAM}, {SRAM, GDRAM}, {NRAM, NRAM}, {NRAM, WRAM},
                             {WRAM, NRAM}, {NRAM, SRAM}, {SRAM, NRAM}, {SRAM, WRAM},
                             {WRAM, SRAM}, {SRAM, SRAM}, {GDRAM, GDRAM}};
  *src = s[d][0];
  *dst = s[d][1];
}

/* Counted instructions (keys of "instructions" in the stats file). */
enum Op {
  OP_MEMCPY, OP_MEMCPY_ASYNC, OP_ADD, OP_SUB, OP_MUL, OP_ADD_SCALAR, OP_SUB_SCALAR,
  OP_MUL_SCALAR, OP_RELU, OP_SIGMOID, OP_TANH, OP_EXP, OP_ABS, OP_MAXPOOL, OP_AVGPOOL,
  OP_CONV, OP_MEMSET_NRAM, OP_WRITE_ZERO, OP_WRITE_VALUE, OP_SUM, OP_MAX, OP_SYNC_CLUSTER,
  OP_SYNC_ALL, OP_FLOAT2INT8, OP_FLOAT2INT16, OP_INT82FLOAT, OP_TRANSPOSE, OP_SCALAR,
  OP_MAXEQ_SCALAR, OP_MINEQ_SCALAR, OP_LOG, OP_CYCLE_ADD, OP_CYCLE_SUB, OP_CYCLE_MUL, OP_COUNT
};
inline const char* op_name(int op) {
  static const char* n[] = {
      "__memcpy", "__memcpy_async", "__bang_add", "__bang_sub", "__bang_mul",
      "__bang_add_scalar", "__bang_sub_scalar", "__bang_mul_scalar", "__bang_active_relu",
      "__bang_active_sigmoid", "__bang_active_tanh", "__bang_active_exp",
      "__bang_active_abs", "__bang_maxpool", "__bang_avgpool", "__bang_conv",
      "__memset_nram", "__bang_write_zero", "__bang_write_value", "__bang_sum",
      "__bang_max", "__sync_cluster", "__sync_all", "__bang_float2int8_rn", "__bang_float2int16_rn",
      "__bang_int82float", "__bang_transpose", "scalar_ops", "__bang_maxeq_scalar",
      "__bang_mineq_scalar", "__bang_active_log", "__bang_cycle_add", "__bang_cycle_sub",
      "__bang_cycle_mul"};
  return n[op];
}

struct KernelStats {
  long long launches = 0, cycles = 0, violations = 0;
  long long peak[4] = {0, 0, 0, 0};  // highest byte offset+1 used per on-chip space
  long long write_conflicts = 0;     // GDRAM bytes written by two tasks between barriers
  bool warned = false;
  long long instr[OP_COUNT] = {};
  long long instr_cycles[OP_COUNT] = {};  // cycles charged per instruction, summed over tasks
  long long bytes[BANGEMU_DIRECTIONS] = {};
};

struct Task {
  enum { NEW, READY, RUNNING, BLOCKED, DONE };
  int id = 0, cluster = 0, core = 0, phys = 0, st = NEW, waiting = 0;
  bool go = false, saved = false;
  /* A core issues to three queues that run side by side until a __sync_* joins them (the
   * mlu-ops three-stage pipeline): clock is where issue stands (synchronous __memcpy and
   * the __sync_* move it), comp / io / move are when the compute, IO (copies touching
   * GDRAM) and move (on-chip copies) queues drain. */
  long long clock = 0;
  long long comp = 0;   // __bang_* and fills
  long long io = 0;     // __memcpy_async to or from GDRAM
  long long move = 0;   // __memcpy_async between on-chip spaces
  struct Span { uintptr_t lo, hi; bool write; const char* fn; };
  std::vector<Span> computing;   // on-chip operands of compute issued since the last join
  std::condition_variable cv;
  std::vector<char> nram, wram;  // contents while the task is suspended at a barrier
  char* stack = nullptr;         // this task thread's stack mapping (sched.h: stack in NRAM)
  size_t stack_size = 0;
  uintptr_t stack_limit = 0;     // lowest usable stack address; below it: NRAM exhausted
};

struct Launch {
  std::string name;
  KernelStats* ks = nullptr;
  unsigned dim[3] = {1, 1, 1};
  bool is_union = false;
  int ntasks = 0, core_dim = 1, cluster_dim = 1, ndone = 0;
  std::vector<std::unique_ptr<Task>> tasks;
  std::mutex m;
  std::condition_variable done_cv;
  bool finished = false;
  std::vector<std::vector<char>> sram;  // per cluster, while another cluster runs
  std::vector<char> sram_valid;
  int sram_owner = -1;
  std::vector<int> arrived;  // per cluster, for __sync_cluster
  int arrived_all = 0;
};

struct State {
  std::map<std::string, KernelStats> kernels;
  std::map<uintptr_t, size_t> gdram;  // cnrtMalloc blocks: start -> bytes
  Launch* launch = nullptr;
  Task* cur = nullptr;
  long long violations = 0;
  long long device_cycles = 0;  // the device clock: every launch's cycles, in order (cnrt.h notifiers)
  bool fatal = true;
  State() {
    const char* v = getenv("BANGEMU_ON_VIOLATION");
    fatal = !(v && strcmp(v, "continue") == 0);
  }
};
inline State& S() { static State s; return s; }

inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

/* ---- stats file ------------------------------------------------------------------ */
inline void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}
/* One JSON object, written to BANGEMU_STATS via tmp + rename so readers never see half. */
inline void write_stats() {
  const char* path = getenv("BANGEMU_STATS");
  if (!path || !*path) return;
  std::string tmp = fmt("%s.tmp.%d", path, (int)getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return;
  State& s = S();
  fprintf(f, "{\"arch\": \"mtp_%d\", \"nram_declared_bytes\": %zu, \"wram_declared_bytes\": %zu, "
             "\"sram_declared_bytes\": %zu, \"violations\": %lld, \"kernels\": [",
          BANGEMU_ARCH, declared(NRAM), declared(WRAM), declared(SRAM), s.violations);
  const char* sep = "";
  for (auto& kv : s.kernels) {
    const KernelStats& k = kv.second;
    fprintf(f, "%s\n  {\"name\": ", sep);
    json_str(f, kv.first.c_str());
    fprintf(f, ", \"launches\": %lld, \"cycles\": %lld, \"instructions\": {", k.launches, k.cycles);
    std::map<std::string, long long> ins;  // sorted keys: stable output
    for (int i = 0; i < OP_COUNT; ++i)
      if (k.instr[i]) ins[op_name(i)] = k.instr[i];
    const char* s2 = "";
    for (auto& e : ins) { fprintf(f, "%s\"%s\": %lld", s2, e.first.c_str(), e.second); s2 = ", "; }
    fprintf(f, "}, \"instruction_cycles\": {");
    s2 = "";
    for (auto& e : ins) {
      for (int i = 0; i < OP_COUNT; ++i)
        if (e.first == op_name(i)) fprintf(f, "%s\"%s\": %lld", s2, e.first.c_str(), k.instr_cycles[i]);
      s2 = ", ";
    }
    fprintf(f, "}, \"memcpy_bytes\": {");
    std::map<std::string, long long> by;
    for (int d = 0; d < BANGEMU_DIRECTIONS; ++d)
      if (k.bytes[d]) by[dir_name(d)] = k.bytes[d];
    s2 = "";
    for (auto& e : by) { fprintf(f, "%s\"%s\": %lld", s2, e.first.c_str(), e.second); s2 = ", "; }
    fprintf(f, "}, \"nram_peak_bytes\": %lld, \"wram_peak_bytes\": %lld, \"sram_peak_bytes\": %lld, "
               "\"violations\": %lld, \"write_conflicts\": %lld}", k.peak[NRAM], k.peak[WRAM], k.peak[SRAM],
            k.violations, k.write_conflicts);
    sep = ",";
  }
  fprintf(f, "\n]}\n");
  if (fclose(f) == 0) rename(tmp.c_str(), path);
  else remove(tmp.c_str());
}
inline void at_exit() { write_stats(); }
/* Registered at start-up in every program that includes bang.h (State first, so it is
 * destroyed after the handler ran). */
inline const bool registered = (S(), std::atexit(at_exit), true);

/* Fatal path: other task threads are parked on condition variables, so no destructors. */
[[noreturn]] inline void die() {
  write_stats();
  fflush(stdout);
  fflush(stderr);
  _exit(87);
}

/* Report a broken rule: one line, counted; fatal unless BANGEMU_ON_VIOLATION=continue,
 * in which case the caller skips the instruction. Always returns false. */
inline bool report(const char* kernel, int task, const char* fn, const std::string& rule,
                   const std::string& values, bool force_fatal = false) {
  State& s = S();
  s.violations++;
  if (s.launch) s.launch->ks->violations++;
  if (kernel)
    fprintf(stderr, "bangemu: error: kernel %s task %d: %s: %s (%s)\n", kernel, task, fn,
            rule.c_str(), values.c_str());
  else
    fprintf(stderr, "bangemu: error: host: %s: %s (%s)\n", fn, rule.c_str(), values.c_str());
  if (s.fatal || force_fatal) die();
  return false;
}
inline bool violation(const char* fn, const std::string& rule, const std::string& values) {
  State& s = S();
  if (!s.launch) return report(nullptr, -1, fn, rule, values);
  return report(s.launch->name.c_str(), s.cur ? s.cur->id : 0, fn, rule, values);
}

inline Task& cur() {
  State& s = S();
  if (!s.cur) {
    fprintf(stderr, "bangemu: error: host: a BANG built-in or intrinsic was used outside a kernel\n");
    die();
  }
  return *s.cur;
}
inline Launch& launch_() { cur(); return *S().launch; }

/* Count one instruction and its cycles. */
inline void count(int op, long long cycles) {
  S().launch->ks->instr[op]++;
  S().launch->ks->instr_cycles[op] += cycles;
}
/* Compute (vector, pool, conv, fills): on the compute queue, behind earlier compute and not
 * before issue; copies issued after it do not wait for it unless a sync says so. */
inline void charge(int op, long long cycles) {
  Task& t = cur();
  t.comp = std::max(t.comp, t.clock) + cycles;
  count(op, cycles);
}
/* The three queues joined: issue waits for all of them. */
inline void join_all(Task& t) {
  t.clock = std::max(std::max(t.clock, t.comp), std::max(t.io, t.move));
  t.computing.clear();
}
/* Synchronous __memcpy: waits for everything issued before it (the data it moves may come
 * from compute or copies still running) and blocks issue until it is done. */
inline void charge_sync_copy(int op, long long cycles) {
  Task& t = cur();
  join_all(t);
  t.clock += cycles;
  count(op, cycles);
}
/* __memcpy_async: queued behind earlier async copies of its queue (IO when it touches
 * GDRAM, else move), overlapping compute and the other queue until a __sync_* joins them. */
inline void charge_async(int op, long long cycles, bool gdram) {
  Task& t = cur();
  long long& q = gdram ? t.io : t.move;
  q = std::max(q, t.clock) + cycles;
  count(op, cycles);
}
inline void join_io(Task& t) { t.clock = std::max(t.clock, t.io); }
inline void join_move(Task& t) { t.clock = std::max(t.clock, t.move); }
inline void join_compute(Task& t) {
  t.clock = std::max(t.clock, t.comp);
  t.computing.clear();
}
inline long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/* Where p is, for messages: "NRAM+128" (deterministic) or "GDRAM". */
inline std::string where(const void* p) {
  int s = space_of(p);
  if (s == GDRAM) return "GDRAM";
  return fmt("%s+%lld", space_name(s), offset_of(s, p));
}

}  // namespace bangemu
#endif
