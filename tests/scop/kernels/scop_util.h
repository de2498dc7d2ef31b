/* Helpers shared by the SCoP test kernels: size macros and result printing.
 *
 * Each kernel is an ordinary C program. Sizes are macros (override with -D). With
 * -DSYMBOLIC the loops are bounded by the kernel function's int arguments instead of the
 * macros, so the same file tests constant and symbolic (parametric) loop bounds. */
#ifndef SCOP_UTIL_H
#define SCOP_UTIL_H

#include <stdio.h>

#ifdef SYMBOLIC
#define SZ(macro, arg) arg
#else
#define SZ(macro, arg) macro
#endif

/* A checksum plus a sample of elements, printed with enough digits for a 1e-6 relative
 * comparison between the serial program and the Sunway build. */
static void print_array(const char *name, const double *a, long n)
{
    double s = 0.0, w = 0.0;
    long k, step = n > 48 ? n / 48 : 1;
    for (k = 0; k < n; k++) {
        s += a[k];
        w += a[k] * (double)(k % 13 + 1);
    }
    printf("%s sum %.15e wsum %.15e\n", name, s, w);
    for (k = 0; k < n; k += step)
        printf("%s[%ld] %.15e\n", name, k, a[k]);
}

#endif
