/* mesh_slave.c - CPE kernels of the mesh program: barriers of a mesh row and of the array,
 * register messages (Athread v1: a ping-pong between CPEs 0 and 1 of row 0), an empty
 * kernel (spawn and join), and inner loops of vector and scalar multiply-adds. */
#include "calib.h"
#include <simd.h>

void k_empty(void *arg) { (void)arg; }

/* width 8: row barriers, 64: array barriers. Result: cycles of reps barriers. */
void k_sync(void *arg)
{
    calib_params p;
    unsigned long t0, t1;
    calib_fetch(&p, arg);
    calib_sync_array();
    t0 = calib_rtc();
    for (int r = 0; r < p.reps; r++) {
        if (p.width == 8) calib_sync_row();
        else calib_sync_array();
    }
    t1 = calib_rtc();
    calib_report(&p, t1 - t0);
}

#ifdef CALIB_V1
/* reps round trips of one message between CPE 0 and CPE 1 (row 0); the others wait. */
void k_regcomm(void *arg)
{
    calib_params p;
    unsigned long t0 = 0, t1 = 0;
    long v = 1;
    calib_fetch(&p, arg);
    calib_sync_array();
    t0 = calib_rtc();
    if (_MYID == 0)
        for (int r = 0; r < p.reps; r++) { REG_PUTR(v, 1); REG_GETR(v); }
    else if (_MYID == 1)
        for (int r = 0; r < p.reps; r++) { REG_GETR(v); v++; REG_PUTR(v, 0); }
    t1 = calib_rtc();
    calib_report(&p, _MYID == 0 ? t1 - t0 : 0);
}
#endif

/* reps x 256 iterations of 8 independent multiply-adds: vector (put = 1) or scalar (0).
 * Result: cycles; the sums go to memory so the loops are not removed. */
#if defined(SWEMU_API_CRTS) || defined(CALIB_CRTS)
typedef floatv8 calib_vec;
#define CALIB_ONES simd_set_floatv8(1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f)
#else
typedef floatv4 calib_vec;
#define CALIB_ONES simd_set_floatv4(1.0f, 1.0f, 1.0f, 1.0f)
#endif
void k_fma(void *arg)
{
    calib_params p;
    unsigned long t0, t1;
    calib_fetch(&p, arg);
    if (p.put) {
        calib_vec a0, a1, a2, a3, a4, a5, a6, a7, x, y;
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = x = y = CALIB_ONES;
        t0 = calib_rtc();
        for (int i = 0; i < p.reps * 256; i++) {
            a0 = simd_vmas(x, y, a0); a1 = simd_vmas(x, y, a1); a2 = simd_vmas(x, y, a2); a3 = simd_vmas(x, y, a3);
            a4 = simd_vmas(x, y, a4); a5 = simd_vmas(x, y, a5); a6 = simd_vmas(x, y, a6); a7 = simd_vmas(x, y, a7);
        }
        t1 = calib_rtc();
        a0 = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
        calib_report(&p, (t1 - t0) + (a0[0] < 0));
    } else {
        volatile float seed = 1.0f;
        float a0, a1, a2, a3, a4, a5, a6, a7, x = seed, y = seed;
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = seed;
        t0 = calib_rtc();
        for (int i = 0; i < p.reps * 256; i++) {
            a0 = x * y + a0; a1 = x * y + a1; a2 = x * y + a2; a3 = x * y + a3;
            a4 = x * y + a4; a5 = x * y + a5; a6 = x * y + a6; a7 = x * y + a7;
        }
        t1 = calib_rtc();
        calib_report(&p, (t1 - t0) + (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 < 0));
    }
}
