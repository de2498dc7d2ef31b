/* __bang_transpose(T* dst, T* src, int height, int width): src is a height x width matrix
 * (row-major), dst gets its width x height transpose, dst[w * height + h] = src[h * width + w].
 * Signature and element types (8-, 16- and 32-bit) as cncc's bang_device_functions_decls.h
 * declares them (zhourunyu/llvm-mlu). Rules: both operands in NRAM, 64-B aligned (assumed,
 * as the other stream ops); height * sizeof(T) and width * sizeof(T) multiples of
 * BANGEMU_TRANSPOSE_MULTIPLE_BYTES (mtp_2xx: Cambricon/mlu-ops' NMS kernels pad both sides to
 * 64 B under `__BANG_ARCH__ < 300` because "transpose need align"; applied on every arch, as
 * the rest of docs/diannao.md's mtp_2xx table); src and dst must not overlap (assumed). Cost:
 * on the compute queue, start-up + BANGEMU_TRANSPOSE_CYCLES_PER_CHUNK per 128-B chunk
 * (assumed). */
#ifndef BANGEMU_TRANSPOSE_H
#define BANGEMU_TRANSPOSE_H

#include "vector.h"

template <class T>
inline void __bang_transpose(T* dst, const T* src, int height, int width) {
  using namespace bangemu;
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "__bang_transpose: 8-, 16- or 32-bit elements");
  const char* fn = op_name(OP_TRANSPOSE);
  cur();
  if (height <= 0 || width <= 0) {
    violation(fn, "height and width must be positive", fmt("height=%d, width=%d", height, width));
    return;
  }
  const long long m = BANGEMU_TRANSPOSE_MULTIPLE_BYTES;
  if (((long long)height * sizeof(T)) % m || ((long long)width * sizeof(T)) % m) {
    violation(fn, fmt("height * sizeof(T) and width * sizeof(T) must be multiples of %lld B", m),
              fmt("height=%d, width=%d, sizeof(T)=%zu", height, width, sizeof(T)));
    return;
  }
  long long by = (long long)height * width * (long long)sizeof(T);
  if ((const char*)dst < (const char*)src + by && (const char*)src < (const char*)dst + by) {
    violation(fn, "src and dst must not overlap", fmt("dst=%s, src=%s, bytes=%lld", where(dst).c_str(),
                                                     where(src).c_str(), by));
    return;
  }
  bool ok = vec(fn, "dst", dst, by);
  ok = vec(fn, "src", src, by) && ok;
  if (!ok) return;
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w) dst[(long long)w * height + h] = src[(long long)h * width + w];
  charge(OP_TRANSPOSE, vector_cycles(by, BANGEMU_TRANSPOSE_CYCLES_PER_CHUNK));
}

#endif
