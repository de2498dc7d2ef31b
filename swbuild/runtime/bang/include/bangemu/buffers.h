/* bangemu buffers: which declared buffer or cnrtMalloc block an operand lies in, the
 * __memcpy_async copies still in flight, and the GDRAM bytes each task wrote.
 *
 * Why the ELF symbol table: g++ lays every __nram__/__wram__/__mlu_shared__ variable into
 * one section per space, so the section bounds alone let a copy run from one buffer into
 * its neighbour.  The program's own symbol table (/proc/self/exe) names each variable and
 * its size; an operand must stay inside the variable it starts in.  A stripped program has
 * no symbols: then only the space's bounds are checked. */
#ifndef BANGEMU_BUFFERS_H
#define BANGEMU_BUFFERS_H

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core.h"

namespace bangemu {

struct Buffer { uintptr_t lo, hi; std::string name; };
struct Gap { uintptr_t lo, hi; };   // bytes no buffer owns: redzones and padding

/* Per space: declared buffers by start address and the injected redzone variables (start,
 * redzone bytes up to its end).  The on-chip sections and bangemu_tail lie side by side
 * (core.h): `gaps` are the bytes of that run no buffer owns, kept filled with REDZONE_FILL;
 * `owner` maps every buffer start of the run to its space, for naming the buffer below a
 * changed byte even when it is in another section. */
struct Layout {
  std::map<uintptr_t, Buffer> by[4];
  std::vector<std::pair<uintptr_t, long long>> rz[4];
  long long rz_bytes[4] = {0, 0, 0, 0};
  std::vector<Gap> gaps;
  std::map<uintptr_t, int> owner;
  std::vector<Gap> others;   // every other allocated section (run-time addresses)
  bool symbols = false;
};
constexpr unsigned char REDZONE_FILL = 0xBD;

inline void read_symbols(Layout& L) {
  int fd = open("/proc/self/exe", O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) { if (fd >= 0) close(fd); return; }
  void* m = mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return;
  const char* base = (const char*)m;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
    munmap(m, (size_t)st.st_size);
    return;
  }
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(base + eh->e_shoff);
  const char* shstr = base + sh[eh->e_shstrndx].sh_offset;
  long long shift[4] = {0, 0, 0, 0};
  int secidx[4] = {-1, -1, -1, -1};
  static const char* secname[4] = {"", "bangemu_nram", "bangemu_wram", "bangemu_sram"};
  for (int i = 0; i < eh->e_shnum; ++i)
    for (int s = NRAM; s <= SRAM; ++s)
      if (!strcmp(shstr + sh[i].sh_name, secname[s]) && region(s).lo) {
        secidx[s] = i;   /* run-time address minus link-time address (PIE) */
        shift[s] = (long long)(uintptr_t)region(s).lo - (long long)sh[i].sh_addr;
      }
  for (int i = 0; i < eh->e_shnum; ++i) {
    const char* n = shstr + sh[i].sh_name;
    if ((sh[i].sh_flags & SHF_ALLOC) && sh[i].sh_size && strncmp(n, "bangemu_", 8) && secidx[NRAM] >= 0) {
      uintptr_t lo = (uintptr_t)((long long)sh[i].sh_addr + shift[NRAM]);
      L.others.push_back(Gap{lo, lo + sh[i].sh_size});
    }
  }
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Sym* sym = (const Elf64_Sym*)(base + sh[i].sh_offset);
    const char* str = base + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
      if (ELF64_ST_TYPE(sym[k].st_info) != STT_OBJECT || sym[k].st_size == 0) continue;
      for (int s = NRAM; s <= SRAM; ++s) {
        if (secidx[s] < 0 || sym[k].st_shndx != secidx[s]) continue;
        uintptr_t lo = (uintptr_t)((long long)sym[k].st_value + shift[s]);
        const char* raw = str + sym[k].st_name;
        L.symbols = true;
        if (strstr(raw, "bangemu_redzone_")) {
          L.rz[s].push_back({lo, (long long)sym[k].st_size});
          continue;
        }
        int status = 0;
        char* dem = abi::__cxa_demangle(raw, nullptr, nullptr, &status);
        L.by[s][lo] = Buffer{lo, lo + sym[k].st_size, status == 0 && dem ? dem : raw};
        free(dem);
      }
    }
  }
  munmap(m, (size_t)st.st_size);
}

inline Layout read_layout() {
  Layout L;
  read_symbols(L);
  for (int s = NRAM; s <= SRAM; ++s) {
    /* redzone bytes are not declared memory: cumulative sizes give offsets without them */
    std::sort(L.rz[s].begin(), L.rz[s].end());
    for (auto& z : L.rz[s]) { L.rz_bytes[s] += z.second; z.second = L.rz_bytes[s]; }
    for (auto& b : L.by[s]) L.owner[b.first] = s;
  }
  if (!L.symbols) return L;   /* stripped program: nothing known between buffers */
  /* the sections, in address order; padding between two of them counts as a gap when no
   * other section lies there */
  std::vector<Gap> secs;
  for (int s = NRAM; s <= SRAM; ++s)
    if (region(s).hi > region(s).lo) secs.push_back(Gap{(uintptr_t)region(s).lo, (uintptr_t)region(s).hi});
  if ((uintptr_t)__stop_bangemu_tail > (uintptr_t)__start_bangemu_tail)
    secs.push_back(Gap{(uintptr_t)__start_bangemu_tail, (uintptr_t)__stop_bangemu_tail});
  std::sort(secs.begin(), secs.end(), [](const Gap& a, const Gap& b) { return a.lo < b.lo; });
  auto between = [&](uintptr_t lo, uintptr_t hi) {
    if (hi - lo >= 4096) return true;
    for (const Gap& o : L.others)
      if (o.lo < hi && lo < o.hi) return true;
    return false;
  };
  std::vector<Gap> runs;
  for (const Gap& g : secs)
    if (!runs.empty() && !between(runs.back().hi, g.lo)) runs.back().hi = g.hi;
    else runs.push_back(g);
  for (const Gap& r : runs) {
    uintptr_t at = r.lo;
    for (auto it = L.owner.lower_bound(r.lo); it != L.owner.end() && it->first < r.hi; ++it) {
      const Buffer& b = L.by[it->second].at(it->first);
      if (b.lo > at) L.gaps.push_back(Gap{at, b.lo});
      at = std::max(at, b.hi);
    }
    if (r.hi > at) L.gaps.push_back(Gap{at, r.hi});
  }
  return L;
}
inline Layout& layout() {
  static Layout L = read_layout();
  return L;
}
inline std::map<uintptr_t, Buffer>* buffers() { return layout().by; }
inline long long redzone_bytes(int s) { return s == GDRAM ? 0 : layout().rz_bytes[s]; }
/* Offset of p from the start of space s, not counting the redzones below p. */
inline long long offset_of(int s, const void* p) {
  long long off = (const char*)p - region(s).lo;
  auto& z = layout().rz[s];
  auto it = std::upper_bound(z.begin(), z.end(), std::make_pair((uintptr_t)p, (long long)-1));
  if (it == z.begin()) return off;
  --it;
  long long size = it->second - (it == z.begin() ? 0 : std::prev(it)->second);
  long long below = it->second;   // redzone bytes up to the end of *it
  if ((uintptr_t)p < it->first + (uintptr_t)size) below -= (long long)(it->first + size - (uintptr_t)p);
  return off - below;
}
/* The declared buffer holding p, or nullptr. */
inline const Buffer* buffer_of(int s, const void* p) {
  auto& m = buffers()[s];
  auto it = m.upper_bound((uintptr_t)p);
  if (it == m.begin()) return nullptr;
  --it;
  return (uintptr_t)p < it->second.hi ? &it->second : nullptr;
}

/* ---- redzones: plain (non-intrinsic) stores past a buffer -------------------------------
 * Filled at every launch; a changed byte is reported at __sync_io, barriers, __memcpy and
 * the kernel's end, naming the buffer below it (the one overrun). */
inline void fill_redzones() {
  for (const Gap& g : layout().gaps) memset((void*)g.lo, REDZONE_FILL, g.hi - g.lo);
}
inline bool check_redzones(const char* fn) {
  Layout& L = layout();
  for (const Gap& g : L.gaps) {
    static const std::vector<unsigned char> fill(4096, REDZONE_FILL);
    const unsigned char* p = (const unsigned char*)g.lo;
    const unsigned char* e = (const unsigned char*)g.hi;
    if (g.hi - g.lo <= fill.size() && !memcmp(p, fill.data(), g.hi - g.lo)) continue;   // the usual case
    while (p < e && *p == REDZONE_FILL) ++p;
    if (p == e) continue;
    memset((void*)g.lo, REDZONE_FILL, g.hi - g.lo);   // report once (BANGEMU_ON_VIOLATION=continue)
    auto above = L.owner.lower_bound(g.hi);
    bool before = above == L.owner.begin();           /* no buffer below: the one above underran */
    auto it = before ? above : std::prev(above);
    if (it == L.owner.end()) return violation(fn, "plain stores must stay inside their buffers", "no buffer declared");
    const Buffer& b = L.by[it->second].at(it->first);
    long long off = before ? (long long)(b.lo - (uintptr_t)p) : (long long)((uintptr_t)p - b.lo);
    return violation(fn, fmt("plain stores must stay inside their %s buffer: %s was written %s",
                             space_name(it->second), b.name.c_str(), before ? "before its start" : "past its end"),
                     fmt("first bad byte %s%c%lld, %s holds %zu B from %s", b.name.c_str(), before ? '-' : '+',
                         off, b.name.c_str(), (size_t)(b.hi - b.lo), where((const void*)b.lo).c_str()));
  }
  return true;
}

/* The cnrtMalloc block holding p: its start and size, or {0, 0}. */
inline std::pair<uintptr_t, size_t> gdram_block(const void* p) {
  auto& b = S().gdram;
  auto it = b.upper_bound((uintptr_t)p);
  if (it == b.begin()) return {0, 0};
  --it;
  if ((uintptr_t)p - it->first < std::max<size_t>(it->second, 1)) return {it->first, it->second};
  return {0, 0};
}
inline std::string gdram_where(const void* p) {
  auto b = gdram_block(p);
  if (!b.second) return fmt("%p", p);
  return fmt("GDRAM block %p+%zu", (void*)b.first, (size_t)((uintptr_t)p - b.first));
}

/* ---- __memcpy_async in flight, per task ------------------------------------------------ */
struct Async {
  char* dst; const char* src; long long size, dst_stride, src_stride, segnum;
  int dir, seq;
  uintptr_t dlo, dhi, slo, shi;   /* hulls of both sides */
  bool gdram;                     /* IO queue (lands at __sync_io), else move (__sync_move) */
};
enum { LAND_IO = 1, LAND_MOVE = 2, LAND_ALL = 3 };
inline std::map<const Task*, std::vector<Async>>& in_flight() {
  static std::map<const Task*, std::vector<Async>> m;
  return m;
}
/* While a __memcpy_async checks its operands: the queue it goes to (LAND_IO / LAND_MOVE),
 * whose earlier copies it cannot race (they complete in issue order); else 0. */
inline int& same_queue_async() { static int q = 0; return q; }
/* Complete t's copies of the queues in `which`, in issue order (__sync_io: IO, __sync_move:
 * move, __sync_io_move_compute, barriers and the kernel's end: both). */
inline void land_async(const Task& t, int which = LAND_ALL) {
  auto it = in_flight().find(&t);
  if (it == in_flight().end()) return;
  std::vector<Async> left;
  for (const Async& a : it->second) {
    if (!((a.gdram ? LAND_IO : LAND_MOVE) & which)) { left.push_back(a); continue; }
    for (long long i = 0; i <= a.segnum; ++i)
      memmove(a.dst + i * a.dst_stride, a.src + i * a.src_stride, (size_t)a.size);
  }
  if (left.empty()) in_flight().erase(it);
  else it->second = left;
}
/* An operand [lo, hi) that `fn` reads (write = false) or writes: not a copy in flight's
 * destination, and not its source when written. */
inline bool check_in_flight(const char* fn, const char* what, uintptr_t lo, uintptr_t hi, bool write) {
  State& s = S();
  if (!s.cur) return true;
  auto it = in_flight().find(s.cur);
  if (it == in_flight().end()) return true;
  for (const Async& a : it->second) {
    if (same_queue_async() == (a.gdram ? LAND_IO : LAND_MOVE)) continue;   /* one queue runs in order */
    bool dst = lo < a.dhi && a.dlo < hi, src = write && lo < a.shi && a.slo < hi;
    if (dst || src)
      return violation(fn, fmt("%s %s the %s of __memcpy_async #%d (%s) before %s", what,
                               write ? "overwrites" : "reads", dst ? "destination" : "source", a.seq,
                               dir_name(a.dir), a.gdram ? "__sync_io" : "__sync_move"),
                       fmt("%s=%s, bytes=%lld", what, where((const void*)lo).c_str(), (long long)(hi - lo)));
  }
  return true;
}
/* A __memcpy_async's side [lo, hi) (its source when !write) against compute still running
 * (issued since the last __sync_compute or join): the copy would read what compute has not
 * written yet, or overwrite what it still reads or writes; a race on the chip. */
inline bool check_computing(const char* what, uintptr_t lo, uintptr_t hi, bool write) {
  Task& t = cur();
  for (const Task::Span& c : t.computing)
    if (lo < c.hi && c.lo < hi && (write || c.write))
      return violation("__memcpy_async", fmt("%s %s what %s %s before __sync_compute", what,
                                             write ? "overwrites" : "reads", c.fn,
                                             c.write ? "still writes" : "still reads"),
                       fmt("%s=%s, bytes=%lld", what, where((const void*)lo).c_str(), (long long)(hi - lo)));
  return true;
}

/* ---- GDRAM writes per task: several tasks writing the same bytes ----------------------- */
struct Written { uintptr_t lo, hi; int task, cluster, ea, ec; };
inline std::vector<Written>& written() { static std::vector<Written> w; return w; }
/* barriers passed in the launch: __sync_all (ea), per cluster __sync_cluster + __sync_all (ec) */
inline int& epoch_all() { static int e; return e; }
inline std::vector<int>& epoch_cluster() { static std::vector<int> e; return e; }
inline void record_write(const Task& t, const void* p, long long n) {
  auto& ec = epoch_cluster();
  if ((int)ec.size() <= t.cluster) ec.resize(t.cluster + 1, 0);
  written().push_back(Written{(uintptr_t)p, (uintptr_t)p + (uintptr_t)n, t.id, t.cluster, epoch_all(), ec[t.cluster]});
}
inline bool unordered(const Written& x, const Written& y) {
  return x.task != y.task && x.ea == y.ea && (x.cluster != y.cluster || x.ec == y.ec);
}

/* At the end of a launch: bytes written by two tasks between the same barriers (the union
 * of the overlaps of unordered pairs). */
inline long long write_conflicts(uintptr_t* first, int* a, int* b) {
  auto& w = written();
  std::vector<std::pair<uintptr_t, uintptr_t>> hits;
  std::sort(w.begin(), w.end(), [](const Written& x, const Written& y) { return x.lo < y.lo; });
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = i + 1; j < w.size() && w[j].lo < w[i].hi; ++j) {
      if (!unordered(w[i], w[j])) continue;
      uintptr_t lo = w[j].lo, hi = std::min(w[i].hi, w[j].hi);
      if (hits.empty() || lo < *first) { *first = lo; *a = std::min(w[i].task, w[j].task); *b = std::max(w[i].task, w[j].task); }
      hits.push_back({lo, hi});
    }
  std::sort(hits.begin(), hits.end());
  long long total = 0;
  uintptr_t end = 0;
  for (auto& h : hits) {
    uintptr_t lo = std::max(h.first, end);
    if (h.second > lo) total += (long long)(h.second - lo);
    end = std::max(end, h.second);
  }
  w.clear();
  epoch_all() = 0;
  epoch_cluster().clear();
  return total;
}

/* ---- SRAM accesses of the current barrier interval (sram2sram.h: copies to another
 * cluster's SRAM race with that cluster's own accesses until a __sync_all) ---------------- */
struct SramTouch { uintptr_t lo, hi; int cluster, task; bool write; };
inline std::vector<SramTouch>& sram_touched() { static std::vector<SramTouch> v; return v; }
/* set while operand() checks the destination of a copy to another cluster */
inline bool& sram_remote_dst() { static bool b = false; return b; }
inline bool sram_access(const char* fn, int cluster, int task, uintptr_t lo, uintptr_t hi, bool write);

/* The operand [p, p+extent) must be in space `want`, aligned to `align` (offsets are
 * measured from the start of the space, as on the chip), inside the declared buffer it
 * starts in (on chip) or inside a cnrtMalloc block (GDRAM: anything else is a host
 * pointer), and not a __memcpy_async destination still in flight ("dst" operands are
 * written: not a source in flight either).  Records the space's peak use. */
inline bool operand(const char* fn, const char* what, const void* p, long long extent,
                    int want, int align) {
  cur();  // intrinsics exist only inside kernels
  int sp = space_of(p);
  bool write = !strcmp(what, "dst");
  if (want >= 0 && sp != want)
    return violation(fn, fmt("%s must be in %s", what, space_name(want)),
                     fmt("%s is in %s", what, where(p).c_str()));
  bool ok = true;
  if (sp == GDRAM) {
    auto b = gdram_block(p);
    if (!b.second)
      return violation(fn, fmt("%s must be device memory (inside a cnrtMalloc block)", what),
                       fmt("%s=%p is in no cnrtMalloc block: a host pointer?", what, p));
    uintptr_t off = (uintptr_t)p - b.first;
#if defined(BANGEMU_GDRAM_ALIGN_BYTES) && BANGEMU_GDRAM_ALIGN_BYTES > 1
    /* a toolchain file that states gdram_align_bytes gets it enforced (offsets from the
     * block, which cnrtMalloc aligns to 64 B) */
    if (off % BANGEMU_GDRAM_ALIGN_BYTES != 0)
      ok = violation(fn, fmt("GDRAM operands must be %d-B aligned", (int)BANGEMU_GDRAM_ALIGN_BYTES),
                     fmt("%s=%s", what, gdram_where(p).c_str()));
#endif
    if (off + (uintptr_t)extent > b.second)
      ok = violation(fn, fmt("%s must stay inside its cnrtMalloc block", what),
                     fmt("offset=%zu, bytes=%lld, block=%zu", (size_t)off, extent, b.second));
    return ok && check_in_flight(fn, what, (uintptr_t)p, (uintptr_t)p + extent, write);
  }
  long long off = offset_of(sp, p);
  long long size = (long long)declared(sp);
  const Buffer* b = buffer_of(sp, p);
  if (off + extent > size)
    ok = violation(fn, fmt("%s must stay inside the declared %s buffers", what, space_name(sp)),
                   fmt("%s=%s, bytes=%lld, declared=%lld", what, where(p).c_str(), extent, size));
  else if (!b && !buffers()[sp].empty())
    ok = violation(fn, fmt("%s must start inside a declared %s buffer", what, space_name(sp)),
                   fmt("%s=%s is between buffers", what, where(p).c_str()));
  else if (b)
    if ((uintptr_t)p + extent > b->hi)
      ok = violation(fn, fmt("%s must stay inside its buffer %s", what, b->name.c_str()),
                     fmt("%s=%s, bytes=%lld, %s holds %zu B from %s", what, where(p).c_str(), extent,
                         b->name.c_str(), (size_t)(b->hi - b->lo), where((const void*)b->lo).c_str()));
  if (align > 1 && off % align != 0)
    ok = violation(fn, fmt("%s operands must be %d-B aligned", space_name(sp), align),
                   fmt("%s=%s", what, where(p).c_str())) && ok;
  if (ok) ok = check_in_flight(fn, what, (uintptr_t)p, (uintptr_t)p + extent, write);
  if (ok && sp == SRAM && !sram_remote_dst())
    ok = sram_access(fn, cur().cluster, cur().id, (uintptr_t)p, (uintptr_t)p + extent, write);
  if (ok) {
    KernelStats* ks = S().launch->ks;
    ks->peak[sp] = std::max(ks->peak[sp], off + extent);
    if (strncmp(fn, "__memcpy", 8) != 0)   /* compute: runs on the compute queue */
      cur().computing.push_back(Task::Span{(uintptr_t)p, (uintptr_t)p + extent, write, fn});
  }
  return ok;
}

}  // namespace bangemu
#endif
