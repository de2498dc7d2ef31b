/* simd.h - CPE vector types and intrinsics, emulated with GCC vector extensions.
 * + - * / work on the types directly.  simd_load/simd_store insist on natural
 * alignment (sizeof the vector) like the hardware; simd_loadu/simd_storeu do not. */
#ifndef SWEMU_SIMD_H
#define SWEMU_SIMD_H

#include "swemu.h"

typedef float floatv4 __attribute__((vector_size(16)));
typedef double doublev4 __attribute__((vector_size(32)));
typedef int intv8 __attribute__((vector_size(32)));
typedef unsigned int uintv8 __attribute__((vector_size(32)));
#ifdef SWEMU_API_CRTS
typedef float floatv8 __attribute__((vector_size(32)));
typedef double doublev8 __attribute__((vector_size(64)));
typedef int intv16 __attribute__((vector_size(64)));
#endif

/* toolchain rule simd_lanes: the chip's float vector has that many lanes */
#ifdef SWEMU_SIMD_LANES
#ifdef __cplusplus
#define SWEMU_STATIC_ASSERT static_assert
#else
#define SWEMU_STATIC_ASSERT _Static_assert
#endif
#ifdef SWEMU_API_CRTS
SWEMU_STATIC_ASSERT(sizeof(floatv8) / sizeof(float) == SWEMU_SIMD_LANES, "simd_lanes of the toolchain file is not floatv8's");
#else
SWEMU_STATIC_ASSERT(sizeof(floatv4) / sizeof(float) == SWEMU_SIMD_LANES, "simd_lanes of the toolchain file is not floatv4's");
#endif
#endif

static inline const void *swemu_simd_chk(const void *p, unsigned long align, const char *op)
{
    if (__builtin_expect(((unsigned long)p & (align - 1)) != 0, 0))
        swemu_simd_misaligned(p, align, op);
    return p;
}

#define simd_load(v, p) \
    ((v) = *(const __typeof__(v) *)swemu_simd_chk((p), sizeof(v), "simd_load"))
#define simd_store(v, p) \
    (*(__typeof__(v) *)swemu_simd_chk((p), sizeof(v), "simd_store") = (v))
#define simd_loadu(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
#define simd_storeu(v, p) __builtin_memcpy((p), &(v), sizeof(v))

#define simd_set_floatv4(a, b, c, d) ((floatv4){(a), (b), (c), (d)})
#define simd_set_doublev4(a, b, c, d) ((doublev4){(a), (b), (c), (d)})
#define simd_set_intv8(a, b, c, d, e, f, g, h) ((intv8){(a), (b), (c), (d), (e), (f), (g), (h)})
#ifdef SWEMU_API_CRTS
#define simd_set_floatv8(a, b, c, d, e, f, g, h) \
    ((floatv8){(a), (b), (c), (d), (e), (f), (g), (h)})
#define simd_set_doublev8(a, b, c, d, e, f, g, h) \
    ((doublev8){(a), (b), (c), (d), (e), (f), (g), (h)})
#endif

/* Arithmetic: the s (single) and d (double) spellings are the same generic operation. */
#define simd_vmas(a, b, c) ((a) * (b) + (c))
#define simd_vmss(a, b, c) ((a) * (b) - (c))
#define simd_vnmas(a, b, c) (-((a) * (b)) + (c))
#define simd_vnmss(a, b, c) (-((a) * (b)) - (c))
#define simd_vmuls(a, b) ((a) * (b))
#define simd_vadds(a, b) ((a) + (b))
#define simd_vsubs(a, b) ((a) - (b))
#define simd_vdivs(a, b) ((a) / (b))
#define simd_vmad simd_vmas
#define simd_vmsd simd_vmss
#define simd_vnmad simd_vnmas
#define simd_vnmsd simd_vnmss
#define simd_vmuld simd_vmuls
#define simd_vaddd simd_vadds
#define simd_vsubd simd_vsubs
#define simd_vdivd simd_vdivs
#define simd_vaddw simd_vadds
#define simd_vsubw simd_vsubs

/* Horizontal sum of all lanes, any vector type. */
#define simd_reduc_plus(v) __extension__({ \
    __typeof__(v) _sv = (v); __typeof__(_sv[0]) _ss = 0; \
    for (unsigned _si = 0; _si < sizeof(_sv) / sizeof(_sv[0]); _si++) _ss += _sv[_si]; \
    _ss; })
#define simd_reduc_plusf simd_reduc_plus
#define simd_reduc_plusd simd_reduc_plus

#endif
