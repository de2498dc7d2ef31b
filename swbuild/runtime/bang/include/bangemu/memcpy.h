/* __memcpy: contiguous and strided copies between the memory levels, with the direction,
 * alignment and size rules of docs/diannao.md and a cost in 64-B off-chip granules. */
#ifndef BANGEMU_MEMCPY_H
#define BANGEMU_MEMCPY_H

#include "buffers.h"

namespace bangemu {

/* Off-chip granules one segment touches; a write that covers a granule only partly costs a
 * read and a write of it. */
inline long long granules(const void* p, long long len, bool write) {
  const long long G = BANGEMU_GDRAM_GRANULE_BYTES;
  if (len <= 0) return 0;
  unsigned long long a = (uintptr_t)p, e = a + (unsigned long long)len;
  long long first = (long long)(a / G), last = (long long)((e - 1) / G);
  long long n = last - first + 1;
  if (write) {
    if (a % G) n++;
    if (e % G && (first != last || a % G == 0)) n++;
  }
  return n;
}

inline long long memcpy_cycles(void* dst, const void* src, long long size, int sd, int ss,
                               long long dst_stride, long long src_stride, long long segs) {
  long long c = BANGEMU_MEMCPY_STARTUP_CYCLES + (segs - 1) * BANGEMU_STRIDED_SEGMENT_CYCLES;
  if (sd == GDRAM || ss == GDRAM) {
    long long g = 0;
    for (long long i = 0; i < segs; ++i) {
      if (ss == GDRAM) g += granules((const char*)src + i * src_stride, size, false);
      if (sd == GDRAM) g += granules((const char*)dst + i * dst_stride, size, true);
    }
    return c + g * BANGEMU_GDRAM_CYCLES_PER_GRANULE;
  }
  long long bpc = (sd == SRAM || ss == SRAM) ? BANGEMU_SRAM_BYTES_PER_CYCLE : BANGEMU_NRAM_BYTES_PER_CYCLE;
  return c + ceil_div(size * segs, bpc);
}

/* The size, segment count and stride rules every __memcpy shares. */
inline bool copy_shape_ok(const char* fn, long long size, long long segnum, long long dst_stride,
                          long long src_stride) {
  bool ok = true;
  if (size < 0) ok = violation(fn, "size must not be negative", fmt("size=%lld", size));
  if (segnum < 0 || segnum > BANGEMU_MEMCPY_MAX_SEGNUM)
    ok = violation(fn, fmt("segnum must be in 0..%d", BANGEMU_MEMCPY_MAX_SEGNUM), fmt("segnum=%lld", segnum));
  if (segnum > 0 && dst_stride < size)
    ok = violation(fn, "dst_stride must be >= len", fmt("dst_stride=%lld, len=%lld", dst_stride, size));
  if (segnum > 0 && src_stride < 0)
    ok = violation(fn, "src_stride must not be negative", fmt("src_stride=%lld", src_stride));
  return ok;
}

inline void do_memcpy(int op, void* dst, const void* src, long long size, int dir,
                      long long dst_stride, long long src_stride, long long segnum) {
  const char* fn = op_name(op);
  Launch& L = launch_();
  check_redzones(fn);
  if (dir < 0 || dir >= BANGEMU_DIRECTIONS) {
    violation(fn, "direction must be one of the mluMemcpyDirection_t values", fmt("dir=%d", dir));
    return;
  }
  const char* dn = dir_name(dir);
  int ws, wd;
  dir_spaces(dir, &ws, &wd);
  bool ok = copy_shape_ok(fn, size, segnum, dst_stride, src_stride);
  if (!ok) return;
  /* Direction: each pointer's actual space must be the one the direction names. */
  int sd = space_of(dst), ss = space_of(src);
  if (sd != wd)
    ok = violation(fn, fmt("%s needs dst in %s", dn, space_name(wd)), fmt("dst is in %s", where(dst).c_str()));
  if (ss != ws)
    ok = violation(fn, fmt("%s needs src in %s", dn, space_name(ws)), fmt("src is in %s", where(src).c_str())) && ok;
  if (!ok) return;
  if ((sd == SRAM || ss == SRAM) && !L.is_union) {
    violation(fn, "SRAM is per cluster and needs a UNION launch", "type=BLOCK");
    return;
  }
  long long dext = segnum * dst_stride + size, sext = segnum * src_stride + size;
  int da = 0, sa = 0;
  if (sd == WRAM) da = BANGEMU_WRAM_ALIGN_BYTES;
  if (ss == WRAM) sa = BANGEMU_WRAM_ALIGN_BYTES;
  if (dir == NRAM2NRAM) da = sa = BANGEMU_NRAM2NRAM_ALIGN_BYTES;
  same_queue_async() = op == OP_MEMCPY_ASYNC ? (sd == GDRAM || ss == GDRAM ? LAND_IO : LAND_MOVE) : 0;
  ok = operand(fn, "dst", dst, dext, wd, da);
  ok = operand(fn, "src", src, sext, ws, sa) && ok;
  same_queue_async() = 0;
  if ((sd == WRAM || ss == WRAM) && size % BANGEMU_WRAM_SIZE_MULTIPLE_BYTES != 0)
    ok = violation(fn, fmt("WRAM copy size must be a multiple of %d B", BANGEMU_WRAM_SIZE_MULTIPLE_BYTES),
                   fmt("%s, size=%lld", dn, size)) && ok;
#if defined(BANGEMU_GDRAM_SIZE_MULTIPLE_BYTES) && BANGEMU_GDRAM_SIZE_MULTIPLE_BYTES > 1
  /* stated by the toolchain file (gdram_size_multiple_bytes): copies to or from GDRAM */
  if ((sd == GDRAM || ss == GDRAM) && size % BANGEMU_GDRAM_SIZE_MULTIPLE_BYTES != 0)
    ok = violation(fn, fmt("GDRAM copy size must be a multiple of %d B", (int)BANGEMU_GDRAM_SIZE_MULTIPLE_BYTES),
                   fmt("%s, size=%lld", dn, size)) && ok;
#endif
  if (dir == NRAM2NRAM && size % BANGEMU_NRAM2NRAM_SIZE_MULTIPLE_BYTES != 0)
    ok = violation(fn, fmt("NRAM2NRAM size must be a multiple of %d B", BANGEMU_NRAM2NRAM_SIZE_MULTIPLE_BYTES),
                   fmt("size=%lld", size)) && ok;
  if (dir == NRAM2NRAM && (const char*)dst < (const char*)src + sext && (const char*)src < (const char*)dst + dext)
    ok = violation(fn, "NRAM2NRAM source and destination must not overlap",
                   fmt("dst=%s, src=%s, bytes=%lld", where(dst).c_str(), where(src).c_str(), size));
  if (!ok) return;
  Task& t = cur();
  if (sd == GDRAM)
    for (long long i = 0; i <= segnum; ++i) record_write(t, (char*)dst + i * dst_stride, size);
  bool gdram = sd == GDRAM || ss == GDRAM;
  if (op == OP_MEMCPY_ASYNC && sd != GDRAM && !check_computing("dst", (uintptr_t)dst, (uintptr_t)dst + dext, true))
    return;
  if (op == OP_MEMCPY_ASYNC && ss != GDRAM && !check_computing("src", (uintptr_t)src, (uintptr_t)src + sext, false))
    return;
  if (op == OP_MEMCPY_ASYNC) {     /* lands at __sync_io (__sync_move on chip), a barrier or the end */
    auto& q = in_flight()[&t];
    q.push_back(Async{(char*)dst, (const char*)src, size, dst_stride, src_stride, segnum, dir,
                      (int)q.size() + 1, (uintptr_t)dst, (uintptr_t)dst + dext, (uintptr_t)src,
                      (uintptr_t)src + sext, gdram});
  } else {
    for (long long i = 0; i <= segnum; ++i)
      memmove((char*)dst + i * dst_stride, (const char*)src + i * src_stride, (size_t)size);
  }
  L.ks->bytes[dir] += size * (segnum + 1);
  long long c = memcpy_cycles(dst, src, size, sd, ss, dst_stride, src_stride, segnum + 1);
  if (op == OP_MEMCPY_ASYNC) charge_async(op, c, gdram);
  else charge_sync_copy(op, c);
}

}  // namespace bangemu

inline void __memcpy(void* dst, const void* src, int size, mluMemcpyDirection_t dir) {
  ::bangemu::do_memcpy(::bangemu::OP_MEMCPY, dst, src, size, dir, 0, 0, 0);
}
/* Strided: segnum + 1 segments of `size` bytes, dst/src advancing by their strides. */
inline void __memcpy(void* dst, const void* src, int size, mluMemcpyDirection_t dir,
                     int dst_stride, int src_stride, int segnum) {
  ::bangemu::do_memcpy(::bangemu::OP_MEMCPY, dst, src, size, dir, dst_stride, src_stride, segnum);
}
/* The data lands at __sync_io, a barrier or the kernel's end (buffers.h: in_flight); an
 * operand touching a copy in flight, or a kernel ending with one, is a violation. The
 * cycles overlap the task's other work (core.h: charge_async). */
inline void __memcpy_async(void* dst, const void* src, int size, mluMemcpyDirection_t dir) {
  ::bangemu::do_memcpy(::bangemu::OP_MEMCPY_ASYNC, dst, src, size, dir, 0, 0, 0);
}
inline void __memcpy_async(void* dst, const void* src, int size, mluMemcpyDirection_t dir,
                           int dst_stride, int src_stride, int segnum) {
  ::bangemu::do_memcpy(::bangemu::OP_MEMCPY_ASYNC, dst, src, size, dir, dst_stride, src_stride, segnum);
}

#endif
