/* __memcpy(..., SRAM2SRAM, id_dst_cluster): a copy from this cluster's SRAM into the SRAM of
 * cluster id_dst_cluster (the overloads clang's BANG header declares for __BANG_ARCH__ >= 200:
 * zhourunyu/llvm-mlu, clang/lib/Headers/__clang_bang_intrinsics.h; synchronous, no async form).
 *
 * Why images: one cluster's SRAM is live at a time (sched.h switch_sram), so a copy to another
 * cluster lands in that cluster's saved image. Why the race check: on the chip the destination
 * cluster runs beside the sender, so the bytes are its only after a __sync_all separates the
 * copy from its own use of them; tasks run one at a time here and would hide the race. Every
 * access to SRAM in a barrier interval is recorded (buffers.h operand: sram_touched) and a
 * remote write that overlaps an access of the destination cluster in the same interval, or
 * another remote write there, in either order, is a violation. */
#ifndef BANGEMU_SRAM2SRAM_H
#define BANGEMU_SRAM2SRAM_H

#include "memcpy.h"
#include "sched.h"

namespace bangemu {

struct SramRemote { uintptr_t lo, hi; int cluster, task; };
inline std::vector<SramRemote>& sram_remote() { static std::vector<SramRemote> v; return v; }

/* [lo, hi) of the destination cluster's SRAM touched by `who` (a remote write when remote). */
inline bool sram_race(const char* fn, int cluster, uintptr_t lo, uintptr_t hi, bool remote) {
  for (const SramTouch& x : sram_touched())
    if (remote && x.cluster == cluster && lo < x.hi && x.lo < hi)
      return violation(fn, fmt("the SRAM of cluster %d is %s by its task %d and written by this copy "
                               "with no __sync_all between them", cluster, x.write ? "written" : "read", x.task),
                       fmt("dst=%s, bytes=%lld", where((const void*)lo).c_str(), (long long)(hi - lo)));
  for (const SramRemote& r : sram_remote())
    if (r.cluster == cluster && lo < r.hi && r.lo < hi)
      return violation(fn, fmt("the SRAM of cluster %d was written by __memcpy SRAM2SRAM of task %d with "
                               "no __sync_all since", cluster, r.task),
                       fmt("%s=%s, bytes=%lld", remote ? "dst" : "operand", where((const void*)lo).c_str(),
                           (long long)(hi - lo)));
  return true;
}

inline void do_sram2sram(void* dst, const void* src, long long size, int dir, long long dst_stride,
                         long long src_stride, long long segnum, int dst_cluster) {
  const char* fn = "__memcpy";
  Launch& L = launch_();
  Task& t = cur();
  if (dir != SRAM2SRAM) {
    violation(fn, "a copy to another cluster needs dir SRAM2SRAM", fmt("dir=%s", dir_name(dir)));
    return;
  }
  if (!L.is_union) {
    violation(fn, "SRAM is per cluster and needs a UNION launch", "type=BLOCK");
    return;
  }
  if (dst_cluster < 0 || dst_cluster >= L.cluster_dim) {
    violation(fn, fmt("id_dst_cluster must be in 0..%d (clusterDim - 1)", L.cluster_dim - 1),
              fmt("id_dst_cluster=%d", dst_cluster));
    return;
  }
  if (dst_cluster == t.cluster) {   /* this cluster's own SRAM: the plain SRAM2SRAM copy */
    do_memcpy(OP_MEMCPY, dst, src, size, dir, dst_stride, src_stride, segnum);
    return;
  }
  if (L.ntasks > BANGEMU_CORES) {
    violation(fn, "a copy to another cluster needs every task resident",
              fmt("taskDim=%d > %d cores", L.ntasks, BANGEMU_CORES));
    return;
  }
  /* the rules of every SRAM2SRAM copy (size, strides, spaces, bounds, alignment) on the
   * address the destination has in its own cluster: the same layout in every cluster */
  bool ok = copy_shape_ok(fn, size, segnum, dst_stride, src_stride);
  if (!ok) return;
  long long dext = segnum * dst_stride + size, sext = segnum * src_stride + size;
  check_redzones(fn);
  ok = operand(fn, "src", src, sext, SRAM, 0);
  sram_remote_dst() = true;          /* not this cluster's bytes: no touch recorded for it */
  ok = operand(fn, "dst", dst, dext, SRAM, 0) && ok;
  sram_remote_dst() = false;
  if (!ok) return;
  uintptr_t lo = (uintptr_t)dst, hi = lo + (uintptr_t)dext;
  if (!sram_race(fn, dst_cluster, lo, hi, true)) return;
  sram_remote().push_back(SramRemote{lo, hi, dst_cluster, t.id});
  /* the destination's image (sched.h): started from the live section when that cluster has
   * none yet (its SRAM holds nothing defined before it is written) */
  std::vector<char>& img = L.sram[dst_cluster];
  if (!L.sram_valid[dst_cluster]) { copy_out(SRAM, img); L.sram_valid[dst_cluster] = 1; }
  char* base = region(SRAM).lo;
  for (long long i = 0; i <= segnum; ++i)
    memmove(img.data() + ((char*)dst + i * dst_stride - base), (const char*)src + i * src_stride, (size_t)size);
  L.ks->bytes[SRAM2SRAM] += size * (segnum + 1);
  charge_sync_copy(OP_MEMCPY, memcpy_cycles(dst, src, size, SRAM, SRAM, dst_stride, src_stride, segnum + 1));
}

/* an SRAM operand of a task of `cluster`: recorded for the race check, and checked against
 * the remote writes of the interval */
inline bool sram_access(const char* fn, int cluster, int task, uintptr_t lo, uintptr_t hi, bool write) {
  if (!sram_race(fn, cluster, lo, hi, false)) return false;
  sram_touched().push_back(SramTouch{lo, hi, cluster, task, write});
  return true;
}
/* a __sync_all: every remote write is now its destination's, every access ordered */
inline void sram_interval_end() {
  sram_remote().clear();
  sram_touched().clear();
}

}  // namespace bangemu

inline void __memcpy(void* dst, void* src, int size, mluMemcpyDirection_t dir, int id_dst_cluster) {
  ::bangemu::do_sram2sram(dst, src, size, dir, 0, 0, 0, id_dst_cluster);
}
inline void __memcpy(void* dst, void* src, int size, mluMemcpyDirection_t dir, int dst_stride,
                     int src_stride, int segnum, int id_dst_cluster) {
  ::bangemu::do_sram2sram(dst, src, size, dir, dst_stride, src_stride, segnum, id_dst_cluster);
}

#endif
