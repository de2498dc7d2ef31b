/* jacobi-2d: TSTEPS sweeps of a 5-point stencil, ping-ponging between A and B.
 * The arrays are globals and the region sits in main, unlike the other kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 90
#endif
#ifndef TSTEPS
#define TSTEPS 6
#endif

static double A[N][N];
static double B[N][N];

int main(void)
{
    int t, i, j;
    int n = N, tsteps = TSTEPS;
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++) {
            A[i][j] = ((double)i * (j + 2) + 2) / N;
            B[i][j] = ((double)i * (j + 3) + 3) / N;
        }
#pragma scop
    for (t = 0; t < SZ(TSTEPS, tsteps); t++) {
        for (i = 1; i < SZ(N, n) - 1; i++)
            for (j = 1; j < SZ(N, n) - 1; j++)
                B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
        for (i = 1; i < SZ(N, n) - 1; i++)
            for (j = 1; j < SZ(N, n) - 1; j++)
                A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
    }
#pragma endscop
    print_array("A", &A[0][0], (long)N * N);
    print_array("B", &B[0][0], (long)N * N);
    return 0;
}
