/* Vector intrinsics on NRAM: element-wise binary and scalar ops, activations, reductions,
 * fills and pooling. Rules: operands in NRAM, 64-B aligned, n * sizeof(T) a multiple of
 * 128 B. Cost: start-up + one cycle per 128-B chunk (a partial chunk is a whole one). */
#ifndef BANGEMU_VECTOR_H
#define BANGEMU_VECTOR_H

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "buffers.h"

namespace bangemu {

template <class T> struct same { typedef T type; };  // keeps scalars out of deduction

/* max as the ISA table (backends/diannao/isa.py) declares it and the mapper relies on: the
 * generated kernels' float max (sw_fmaxf), NaN in -> NaN out (std::max drops a NaN in b). */
template <class T> inline T nan_max(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; }

inline long long vector_cycles(long long bytes, long long per_chunk = 1) {
  return BANGEMU_VECTOR_STARTUP_CYCLES + ceil_div(bytes, BANGEMU_VECTOR_BYTES_PER_CYCLE) * per_chunk;
}

/* n > 0 and n * elem a multiple of the vector size. */
inline bool count_rule(const char* fn, long long n, size_t elem) {
  cur();
  if (n <= 0) return violation(fn, "n must be positive", fmt("n=%lld", n));
  if ((n * (long long)elem) % BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES != 0)
    return violation(fn, fmt("n * sizeof(T) must be a multiple of %d B", BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES),
                     fmt("n=%lld, sizeof(T)=%zu, bytes=%lld", n, elem, n * (long long)elem));
  return true;
}
inline bool vec(const char* fn, const char* what, const void* p, long long bytes) {
  return operand(fn, what, p, bytes, NRAM, BANGEMU_VECTOR_ALIGN_BYTES);
}

template <class T, class F>
inline void binary(int op, T* dst, const T* a, const T* b, int n, F f) {
  const char* fn = op_name(op);
  if (!count_rule(fn, n, sizeof(T))) return;
  long long by = (long long)n * sizeof(T);
  bool ok = vec(fn, "dst", dst, by);
  ok = vec(fn, "src0", a, by) && ok;
  ok = vec(fn, "src1", b, by) && ok;
  if (!ok) return;
  for (int i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
  charge(op, vector_cycles(by));
}

/* dst[i] = f(a[i], b[i % m]) for i < n: the cycle ops, b's m elements repeated over a (what a
 * per-channel operand of an HWC tile is). Signature as Cambricon's mlu-ops calls them
 * (__bang_cycle_mul(dst, src, cycle_src, elem_count, cycle_count), e.g. its yolo_box and
 * voxelization kernels); rules: the non-cycle op's for both counts (NRAM, 64-B aligned,
 * a multiple of 128 B: mlu-ops aligns cycle_count to NFU_ALIGN_SIZE, assumed required) and
 * elem_count a multiple of cycle_count; cost: the non-cycle op of elem_count (assumed). */
template <class T, class F>
inline void cycle_binary(int op, T* dst, const T* a, const T* b, int n, int m, F f) {
  const char* fn = op_name(op);
  if (!count_rule(fn, n, sizeof(T)) || !count_rule(fn, m, sizeof(T))) return;
  if (n % m != 0) {
    violation(fn, "elem_count must be a multiple of cycle_count", fmt("elem_count=%d, cycle_count=%d", n, m));
    return;
  }
  long long by = (long long)n * sizeof(T);
  bool ok = vec(fn, "dst", dst, by);
  ok = vec(fn, "src", a, by) && ok;
  ok = vec(fn, "cycle_src", b, (long long)m * sizeof(T)) && ok;
  if (!ok) return;
  for (int i = 0; i < n; ++i) dst[i] = f(a[i], b[i % m]);
  charge(op, vector_cycles(by));
}

/* dst may equal src (in place). */
template <class T, class F>
inline void unary(int op, T* dst, const T* src, int n, F f, long long per_chunk = 1) {
  const char* fn = op_name(op);
  if (!count_rule(fn, n, sizeof(T))) return;
  long long by = (long long)n * sizeof(T);
  bool ok = vec(fn, "dst", dst, by);
  ok = vec(fn, "src", src, by) && ok;
  if (!ok) return;
  for (int i = 0; i < n; ++i) dst[i] = f(src[i]);
  charge(op, vector_cycles(by, per_chunk));
}

/* Fills have no size rule in the table: only the space and the bounds are checked. */
template <class T>
inline void fill(int op, void* dst, int n, T v) {
  const char* fn = op_name(op);
  cur();
  if (n < 0) { violation(fn, "n must not be negative", fmt("n=%d", n)); return; }
  long long by = (long long)n * sizeof(T);
  if (!operand(fn, "dst", dst, by, NRAM, 0)) return;
  for (int i = 0; i < n; ++i) memcpy((char*)dst + (size_t)i * sizeof(T), &v, sizeof(T));
  charge(op, vector_cycles(by));
}

/* HWC pooling without padding: out (Ho, Wo, C), Ho = (H - kh) / sh + 1. */
template <class T>
inline void pool(int op, T* dst, const T* src, int C, int H, int W, int kh, int kw, int sw, int sh) {
  const char* fn = op_name(op);
  cur();
  bool ok = true;
  if (C <= 0 || kh <= 0 || kw <= 0 || sw <= 0 || sh <= 0 || H < kh || W < kw)
    ok = violation(fn, "need C, kernel and strides > 0 and the window inside H x W",
                   fmt("C=%d, H=%d, W=%d, kh=%d, kw=%d, sw=%d, sh=%d", C, H, W, kh, kw, sw, sh));
  else if ((C * (long long)sizeof(T)) % BANGEMU_POOL_C_MULTIPLE_BYTES != 0)
    ok = violation(fn, fmt("C * sizeof(T) must be a multiple of %d B (HWC layout)", BANGEMU_POOL_C_MULTIPLE_BYTES),
                   fmt("C=%d, sizeof(T)=%zu", C, sizeof(T)));
  if (!ok) return;
  int Ho = (H - kh) / sh + 1, Wo = (W - kw) / sw + 1;
  ok = vec(fn, "dst", dst, (long long)Ho * Wo * C * sizeof(T));
  ok = vec(fn, "src", src, (long long)H * W * C * sizeof(T)) && ok;
  if (!ok) return;
  for (int oh = 0; oh < Ho; ++oh)
    for (int ow = 0; ow < Wo; ++ow)
      for (int c = 0; c < C; ++c) {
        T acc = src[((long long)oh * sh * W + (long long)ow * sw) * C + c];
        if (op == OP_AVGPOOL) acc = 0;
        for (int y = 0; y < kh; ++y)
          for (int x = 0; x < kw; ++x) {
            T v = src[((long long)(oh * sh + y) * W + ow * sw + x) * C + c];
            acc = op == OP_AVGPOOL ? acc + v : nan_max(acc, v);
          }
        dst[((long long)oh * Wo + ow) * C + c] = op == OP_AVGPOOL ? acc / (T)(kh * kw) : acc;
      }
  charge(op, BANGEMU_VECTOR_STARTUP_CYCLES +
                 (long long)Ho * Wo * kh * kw * ceil_div(C * (long long)sizeof(T), BANGEMU_VECTOR_BYTES_PER_CYCLE));
}

}  // namespace bangemu

#define BANGEMU_BINARY(name, OP, expr)                                                    \
  template <class T> inline void name(T* dst, const T* src0, const T* src1, int n) {      \
    ::bangemu::binary(::bangemu::OP, dst, src0, src1, n, [](T a, T b) { return (T)(expr); }); \
  }
BANGEMU_BINARY(__bang_add, OP_ADD, a + b)
BANGEMU_BINARY(__bang_sub, OP_SUB, a - b)
BANGEMU_BINARY(__bang_mul, OP_MUL, a * b)
#undef BANGEMU_BINARY

#define BANGEMU_CYCLE(name, OP, expr)                                                     \
  template <class T> inline void name(T* dst, const T* src, const T* cyc, int n, int m) {   \
    ::bangemu::cycle_binary(::bangemu::OP, dst, src, cyc, n, m, [](T a, T b) { return (T)(expr); }); \
  }
BANGEMU_CYCLE(__bang_cycle_add, OP_CYCLE_ADD, a + b)
BANGEMU_CYCLE(__bang_cycle_sub, OP_CYCLE_SUB, a - b)
BANGEMU_CYCLE(__bang_cycle_mul, OP_CYCLE_MUL, a * b)
#undef BANGEMU_CYCLE

#define BANGEMU_SCALAR(name, OP, expr)                                                    \
  template <class T>                                                                      \
  inline void name(T* dst, const T* src, typename ::bangemu::same<T>::type value, int n) { \
    ::bangemu::unary(::bangemu::OP, dst, src, n, [value](T a) { return (T)(expr); });     \
  }
BANGEMU_SCALAR(__bang_add_scalar, OP_ADD_SCALAR, a + value)
BANGEMU_SCALAR(__bang_sub_scalar, OP_SUB_SCALAR, a - value)
BANGEMU_SCALAR(__bang_mul_scalar, OP_MUL_SCALAR, a * value)
#undef BANGEMU_SCALAR

/* max / min against a scalar, mtp_3xx (the declarations say __BANG_ARCH__ >= 322): a NaN
 * element gives the scalar. BANG has __bang_nan_maximum for "a NaN operand is returned", so
 * its plain maximum is IEEE maxNum, and these are taken to behave the same (assumed: the
 * declarations state no NaN rule for them). As C: a >= v ? a : v, what isa.py declares. */
#define BANGEMU_CLAMP(name, OP, expr)                                                     \
  template <class T>                                                                      \
  inline void name(T* dst, const T* src, typename ::bangemu::same<T>::type value, int n) { \
    if (BANGEMU_ARCH < 322) {                                                             \
      ::bangemu::cur();                                                                   \
      ::bangemu::violation(::bangemu::op_name(::bangemu::OP), "needs mtp_322 or later",    \
                           ::bangemu::fmt("arch=mtp_%d", BANGEMU_ARCH));                  \
      return;                                                                             \
    }                                                                                     \
    ::bangemu::unary(::bangemu::OP, dst, src, n, [value](T a) { return (T)(expr); });     \
  }
BANGEMU_CLAMP(__bang_maxeq_scalar, OP_MAXEQ_SCALAR, a >= value ? a : value)
BANGEMU_CLAMP(__bang_mineq_scalar, OP_MINEQ_SCALAR, a <= value ? a : value)
#undef BANGEMU_CLAMP

/* Activations (table-driven units on the chip: transcendental ones cost more per chunk). */
#define BANGEMU_ACTIVE(name, OP, chunk, expr)                                             \
  template <class T> inline void name(T* dst, const T* src, int n) {                      \
    ::bangemu::unary(::bangemu::OP, dst, src, n, [](T a) { return (T)(expr); }, chunk);   \
  }
/* relu is nan_max(0, a) (relu(-0.0) = -0.0, as onnxruntime) and abs clears the sign bit
 * (-0.0 -> +0.0), both NaN in -> NaN out, as isa.py declares them (docs/diannao.md). */
BANGEMU_ACTIVE(__bang_active_relu, OP_RELU, 1, ::bangemu::nan_max((T)0, a))
BANGEMU_ACTIVE(__bang_active_abs, OP_ABS, 1, a != a ? a : a < (T)0 ? -a : a == (T)0 ? (T)0 : a)
BANGEMU_ACTIVE(__bang_active_sigmoid, OP_SIGMOID, BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK, 1.0f / (1.0f + std::exp(-(float)a)))
BANGEMU_ACTIVE(__bang_active_tanh, OP_TANH, BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK, std::tanh((float)a))
BANGEMU_ACTIVE(__bang_active_exp, OP_EXP, BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK, std::exp((float)a))
/* natural log, as llvm-mlu's bang_device_functions_decls.h declares it (float from mtp_2xx):
 * log(0) = -inf, log(x < 0) = NaN, as logf */
BANGEMU_ACTIVE(__bang_active_log, OP_LOG, BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK, std::log((float)a))
#undef BANGEMU_ACTIVE

/* Conversions to fixed point, what __bang_conv's int8/int16 inputs come from:
 * dst = saturate(rint(src / 2^position)), ties to even; NaN -> 0. Rules as a vector op on
 * the float side (n * 4 a multiple of 128 B), both operands NRAM and 64-B aligned; cost: a
 * vector op over the float bytes (assumed: one pass of the vector unit). */
template <class I>
inline void float2fix(int op, I* dst, const float* src, int n, int position) {
  using namespace bangemu;
  const char* fn = op_name(op);
  if (!count_rule(fn, n, sizeof(float))) return;
  bool ok = vec(fn, "dst", dst, (long long)n * sizeof(I));
  ok = vec(fn, "src", src, (long long)n * sizeof(float)) && ok;
  if (!ok) return;
  const double lo = (double)std::numeric_limits<I>::min(), hi = (double)std::numeric_limits<I>::max();
  for (int i = 0; i < n; ++i) {
    double v = std::nearbyint(std::ldexp((double)src[i], -position));
    dst[i] = (I)(v != v ? 0.0 : v < lo ? lo : v > hi ? hi : v);
  }
  charge(op, vector_cycles((long long)n * sizeof(float)));
}
inline void __bang_float2int8_rn(int8_t* dst, const float* src, int n, int position) {
  float2fix(::bangemu::OP_FLOAT2INT8, dst, src, n, position);
}
inline void __bang_float2int16_rn(int16_t* dst, const float* src, int n, int position) {
  float2fix(::bangemu::OP_FLOAT2INT16, dst, src, n, position);
}
/* And back: dst = src * 2^position (exact), what reads an int8 activation stored as bytes
 * (schedule/narrow.py); rules and cost as above, over the float side's bytes. */
inline void __bang_int82float(float* dst, const int8_t* src, int n, int position) {
  using namespace bangemu;
  const char* fn = op_name(OP_INT82FLOAT);
  if (!count_rule(fn, n, sizeof(float))) return;
  bool ok = vec(fn, "dst", dst, (long long)n * sizeof(float));
  ok = vec(fn, "src", src, (long long)n * sizeof(int8_t)) && ok;
  if (!ok) return;
  for (int i = 0; i < n; ++i) dst[i] = std::ldexp((float)src[i], position);
  charge(OP_INT82FLOAT, vector_cycles((long long)n * sizeof(float)));
}

/* Scalar C on the core (loops the printer could not map to an intrinsic): g++ runs the
 * code itself, this charges it. `ops` is the operation count the generated code states
 * (arithmetic, loads, stores, index steps); "scalar_ops" counts operations, not calls.
 * On the compute queue: the core's own pipeline does the work. */
inline void __bangemu_scalar(long long ops) {
  using namespace bangemu;
  if (ops <= 0) return;
  Task& t = cur();
  const long long cycles = ops * BANGEMU_SCALAR_CYCLES_PER_OP;
  t.comp = std::max(t.comp, t.clock) + cycles;
  S().launch->ks->instr[OP_SCALAR] += ops;
  S().launch->ks->instr_cycles[OP_SCALAR] += cycles;
}

/* Reductions: the result goes to dst[0]; dst needs one 128-B vector. */
template <class T> inline void __bang_sum(T* dst, const T* src, int n) {
  using namespace bangemu;
  const char* fn = op_name(OP_SUM);
  if (!count_rule(fn, n, sizeof(T))) return;
  bool ok = vec(fn, "dst", dst, BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES);
  if (!(vec(fn, "src", src, (long long)n * sizeof(T)) && ok)) return;
  T acc = 0;
  for (int i = 0; i < n; ++i) acc += src[i];
  dst[0] = acc;
  charge(OP_SUM, vector_cycles((long long)n * sizeof(T)));
}
template <class T> inline void __bang_max(T* dst, const T* src, int n) {
  using namespace bangemu;
  const char* fn = op_name(OP_MAX);
  if (!count_rule(fn, n, sizeof(T))) return;
  bool ok = vec(fn, "dst", dst, BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES);
  if (!(vec(fn, "src", src, (long long)n * sizeof(T)) && ok)) return;
  T acc = src[0];
  for (int i = 1; i < n; ++i) acc = nan_max(acc, src[i]);
  dst[0] = acc;
  charge(OP_MAX, vector_cycles((long long)n * sizeof(T)));
}

/* __memset_nram(dst, n, value): n elements of value's type (overloads as in BANG; a double
 * value is ambiguous on purpose). */
#define BANGEMU_MEMSET(T) \
  inline void __memset_nram(void* dst, int n, T v) { ::bangemu::fill(::bangemu::OP_MEMSET_NRAM, dst, n, v); }
BANGEMU_MEMSET(char)
BANGEMU_MEMSET(signed char)
BANGEMU_MEMSET(unsigned char)
BANGEMU_MEMSET(short)
BANGEMU_MEMSET(unsigned short)
BANGEMU_MEMSET(int)
BANGEMU_MEMSET(unsigned int)
BANGEMU_MEMSET(float)
#undef BANGEMU_MEMSET
template <class T> inline void __bang_write_zero(T* dst, int n) {
  ::bangemu::fill(::bangemu::OP_WRITE_ZERO, dst, n, (T)0);
}
template <class T> inline void __bang_write_value(T* dst, int n, typename ::bangemu::same<T>::type v) {
  ::bangemu::fill(::bangemu::OP_WRITE_VALUE, dst, n, (T)v);
}

/* Pooling on HWC data; the 7-argument form uses the kernel size as stride. */
template <class T>
inline void __bang_maxpool(T* dst, const T* src, int C, int H, int W, int kh, int kw, int sw, int sh) {
  ::bangemu::pool(::bangemu::OP_MAXPOOL, dst, src, C, H, W, kh, kw, sw, sh);
}
template <class T>
inline void __bang_maxpool(T* dst, const T* src, int C, int H, int W, int kh, int kw) {
  ::bangemu::pool(::bangemu::OP_MAXPOOL, dst, src, C, H, W, kh, kw, kw, kh);
}
template <class T>
inline void __bang_avgpool(T* dst, const T* src, int C, int H, int W, int kh, int kw, int sw, int sh) {
  ::bangemu::pool(::bangemu::OP_AVGPOOL, dst, src, C, H, W, kh, kw, sw, sh);
}
template <class T>
inline void __bang_avgpool(T* dst, const T* src, int C, int H, int W, int kh, int kw) {
  ::bangemu::pool(::bangemu::OP_AVGPOOL, dst, src, C, H, W, kh, kw, kw, kh);
}

#endif
