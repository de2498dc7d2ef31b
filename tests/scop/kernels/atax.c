/* atax: y = A^T * (A * x) */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef M
#define M 90
#endif
#ifndef N
#define N 110
#endif

static void kernel_atax(int m, int n, double A[SZ(M, m)][SZ(N, n)], double x[SZ(N, n)],
                        double y[SZ(N, n)], double tmp[SZ(M, m)])
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(N, n); i++)
        y[i] = 0;
    for (i = 0; i < SZ(M, m); i++) {
        tmp[i] = 0.0;
        for (j = 0; j < SZ(N, n); j++)
            tmp[i] = tmp[i] + A[i][j] * x[j];
        for (j = 0; j < SZ(N, n); j++)
            y[j] = y[j] + A[i][j] * tmp[i];
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[N] = malloc(sizeof(double) * M * N);
    double *x = malloc(sizeof(double) * N);
    double *y = malloc(sizeof(double) * N);
    double *tmp = malloc(sizeof(double) * M);
    for (i = 0; i < N; i++)
        x[i] = 1.0 + i / (double)N;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++)
            A[i][j] = (double)((i + j) % N) / (5 * M);
    kernel_atax(M, N, A, x, y, tmp);
    print_array("y", y, N);
    print_array("tmp", tmp, M);
    free(A);
    free(x);
    free(y);
    free(tmp);
    return 0;
}
