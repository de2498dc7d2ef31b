/* gemver: A = A + u1 v1^T + u2 v2^T; x = x + beta A^T y + z; w = w + alpha A x */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 120
#endif

static void kernel_gemver(int n, double alpha, double beta, double A[SZ(N, n)][SZ(N, n)],
                          double u1[SZ(N, n)], double v1[SZ(N, n)], double u2[SZ(N, n)],
                          double v2[SZ(N, n)], double w[SZ(N, n)], double x[SZ(N, n)],
                          double y[SZ(N, n)], double z[SZ(N, n)])
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < SZ(N, n); j++)
            A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < SZ(N, n); j++)
            x[i] = x[i] + beta * A[j][i] * y[j];
    for (i = 0; i < SZ(N, n); i++)
        x[i] = x[i] + z[i];
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < SZ(N, n); j++)
            w[i] = w[i] + alpha * A[i][j] * x[j];
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[N] = malloc(sizeof(double) * N * N);
    double *u1 = malloc(sizeof(double) * N), *v1 = malloc(sizeof(double) * N);
    double *u2 = malloc(sizeof(double) * N), *v2 = malloc(sizeof(double) * N);
    double *w = malloc(sizeof(double) * N), *x = malloc(sizeof(double) * N);
    double *y = malloc(sizeof(double) * N), *z = malloc(sizeof(double) * N);
    double fn = (double)N;
    for (i = 0; i < N; i++) {
        u1[i] = i;
        u2[i] = ((i + 1) / fn) / 2.0;
        v1[i] = ((i + 1) / fn) / 4.0;
        v2[i] = ((i + 1) / fn) / 6.0;
        y[i] = ((i + 1) / fn) / 8.0;
        z[i] = ((i + 1) / fn) / 9.0;
        x[i] = 0.0;
        w[i] = 0.0;
        for (j = 0; j < N; j++)
            A[i][j] = (double)(i * j % N) / N;
    }
    kernel_gemver(N, 1.5, 1.2, A, u1, v1, u2, v2, w, x, y, z);
    print_array("A", &A[0][0], (long)N * N);
    print_array("x", x, N);
    print_array("w", w, N);
    free(A);
    free(u1);
    free(v1);
    free(u2);
    free(v2);
    free(w);
    free(x);
    free(y);
    free(z);
    return 0;
}
