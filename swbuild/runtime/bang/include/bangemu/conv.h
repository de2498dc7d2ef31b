/* __bang_conv and its WRAM weight layout.
 *
 * src (NRAM) is HWC [H][W][Ci]; dst (NRAM) is HWC [Ho][Wo][Co], Ho = (H - kh) / stride_h + 1,
 * Wo = (W - kw) / stride_w + 1 (no padding: pad with zeros beforehand). The kernel (WRAM)
 * holds Co filters of kh*kw*Ci values in [kh][kw][Ci] order, reordered so that output
 * channel co sits in bank co % 64: the buffer is cut into 64 equal slices (banks) and slice
 * b holds, in order, the filters of co = b, b + 64, b + 128, ...
 *
 *   offset(co, y, x, ci) = ((co % 64) * (Co / 64) + co / 64) * (kh*kw*Ci) + (y*kw + x)*Ci + ci
 *
 * bangemu_reorder_conv_weights() below produces that layout on the host. Float inputs need
 * mtp_3xx; int8/int16 inputs (any arch) give dst = sum(src * kernel) * 2^fix_position. */
#ifndef BANGEMU_CONV_H
#define BANGEMU_CONV_H

#include <type_traits>

#include "buffers.h"

/* Host helpers: from [Co][kh][kw][Ci] (OHWI) or ONNX's [Co][Ci][kh][kw] (OIHW). */
inline long long bangemu_conv_weight_offset(int co, int y, int x, int ci, int Co, int kh, int kw, int Ci) {
  const int B = BANGEMU_WRAM_BANKS;
  long long slot = (long long)(co % B) * (Co / B) + co / B;
  return slot * kh * kw * Ci + ((long long)y * kw + x) * Ci + ci;
}
template <class T>
inline void bangemu_reorder_conv_weights(T* dst, const T* ohwi, int Co, int kh, int kw, int Ci) {
  for (int co = 0; co < Co; ++co)
    for (int y = 0; y < kh; ++y)
      for (int x = 0; x < kw; ++x)
        for (int ci = 0; ci < Ci; ++ci)
          dst[bangemu_conv_weight_offset(co, y, x, ci, Co, kh, kw, Ci)] =
              ohwi[(((long long)co * kh + y) * kw + x) * Ci + ci];
}
template <class T>
inline void bangemu_reorder_conv_weights_oihw(T* dst, const T* oihw, int Co, int Ci, int kh, int kw) {
  for (int co = 0; co < Co; ++co)
    for (int ci = 0; ci < Ci; ++ci)
      for (int y = 0; y < kh; ++y)
        for (int x = 0; x < kw; ++x)
          dst[bangemu_conv_weight_offset(co, y, x, ci, Co, kh, kw, Ci)] =
              oihw[(((long long)co * Ci + ci) * kh + y) * kw + x];
}

namespace bangemu {

template <class TD, class TS, class TK>
inline void conv(TD* dst, const TS* src, const TK* kernel, int Ci, int H, int W, int kh, int kw,
                 int sw, int sh, int Co, int fix_position) {
  const char* fn = "__bang_conv";
  cur();
  const bool is_float = std::is_floating_point<TS>::value || std::is_floating_point<TK>::value;
  bool ok = true;
  if (is_float && !BANGEMU_FLOAT_CONV)
    ok = violation(fn, "float convolution needs mtp_3xx (MLU2xx convolves fixed-point int8/int16)",
                   fmt("arch=mtp_%d", BANGEMU_ARCH));
  if (Ci <= 0 || Co <= 0 || kh <= 0 || kw <= 0 || sw <= 0 || sh <= 0 || H < kh || W < kw)
    ok = violation(fn, "need Ci, Co, kernel and strides > 0 and the window inside H x W",
                   fmt("Ci=%d, H=%d, W=%d, kh=%d, kw=%d, sw=%d, sh=%d, Co=%d", Ci, H, W, kh, kw, sw, sh, Co)) && ok;
  if (!ok) return;
  if ((Ci * (long long)sizeof(TS)) % BANGEMU_CONV_CI_MULTIPLE_BYTES != 0)
    ok = violation(fn, fmt("Ci * sizeof(T) must be a multiple of %d B", BANGEMU_CONV_CI_MULTIPLE_BYTES),
                   fmt("Ci=%d, sizeof(T)=%zu", Ci, sizeof(TS)));
  if (Co % BANGEMU_CONV_CO_MULTIPLE != 0)
    ok = violation(fn, fmt("Co must be a multiple of %d (one WRAM bank per output channel)", BANGEMU_CONV_CO_MULTIPLE),
                   fmt("Co=%d", Co)) && ok;
  if (!ok) return;
  int Ho = (H - kh) / sh + 1, Wo = (W - kw) / sw + 1;
  long long K = (long long)kh * kw * Ci;
  ok = operand(fn, "dst", dst, (long long)Ho * Wo * Co * sizeof(TD), NRAM, BANGEMU_VECTOR_ALIGN_BYTES);
  ok = operand(fn, "src", src, (long long)H * W * Ci * sizeof(TS), NRAM, BANGEMU_VECTOR_ALIGN_BYTES) && ok;
  ok = operand(fn, "kernel", kernel, Co * K * (long long)sizeof(TK), WRAM, BANGEMU_WRAM_ALIGN_BYTES) && ok;
  if (!ok) return;
  typedef typename std::conditional<std::is_floating_point<TS>::value, float, long long>::type Acc;
  const double scale = is_float ? 1.0 : std::ldexp(1.0, fix_position);
  for (int oh = 0; oh < Ho; ++oh)
    for (int ow = 0; ow < Wo; ++ow)
      for (int co = 0; co < Co; ++co) {
        const TK* w = kernel + bangemu_conv_weight_offset(co, 0, 0, 0, Co, kh, kw, Ci);
        Acc p[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // 8 partial sums: lets g++ vectorise
        const long long n = (long long)kw * Ci;
        for (int y = 0; y < kh; ++y) {
          const TS* row = src + ((long long)(oh * sh + y) * W + (long long)ow * sw) * Ci;
          const TK* wrow = w + (long long)y * kw * Ci;
          const long long m = n / 8 * 8;
          for (long long i = 0; i < m; i += 8)
            for (int j = 0; j < 8; ++j) p[j] += (Acc)row[i + j] * (Acc)wrow[i + j];
          for (long long i = 0; i < n - m; ++i) p[0] += (Acc)row[m + i] * (Acc)wrow[m + i];
        }
        Acc acc = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
        dst[((long long)oh * Wo + ow) * Co + co] = (TD)(acc * scale);
      }
  long long macs = (long long)Ho * Wo * Co * K;
  long long rate = std::is_floating_point<TS>::value ? BANGEMU_CONV_FLOAT_MACS_PER_CYCLE
                   : sizeof(TS) == 1 && sizeof(TK) == 1 ? BANGEMU_CONV_INT8_MACS_PER_CYCLE
                                                        : BANGEMU_CONV_INT16_MACS_PER_CYCLE;
  charge(OP_CONV, BANGEMU_CONV_STARTUP_CYCLES + ceil_div(macs, rate > 0 ? rate : 1));
}

}  // namespace bangemu

template <class TD, class TS, class TK>
inline void __bang_conv(TD* dst, TS* src, TK* kernel, int channel_input, int height, int width,
                        int kernel_height, int kernel_width, int stride_w, int stride_h,
                        int channel_output, int fix_position = 0) {
  ::bangemu::conv<TD, TS, TK>(dst, src, kernel, channel_input, height, width, kernel_height,
                              kernel_width, stride_w, stride_h, channel_output, fix_position);
}

#endif
