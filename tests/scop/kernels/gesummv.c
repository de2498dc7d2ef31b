/* gesummv: y = alpha * A * x + beta * B * x */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 110
#endif

static void kernel_gesummv(int n, double alpha, double beta, double A[SZ(N, n)][SZ(N, n)],
                           double B[SZ(N, n)][SZ(N, n)], double tmp[SZ(N, n)], double x[SZ(N, n)],
                           double y[SZ(N, n)])
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(N, n); i++) {
        tmp[i] = 0.0;
        y[i] = 0.0;
        for (j = 0; j < SZ(N, n); j++) {
            tmp[i] = A[i][j] * x[j] + tmp[i];
            y[i] = B[i][j] * x[j] + y[i];
        }
        y[i] = alpha * tmp[i] + beta * y[i];
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[N] = malloc(sizeof(double) * N * N);
    double (*B)[N] = malloc(sizeof(double) * N * N);
    double *tmp = malloc(sizeof(double) * N), *x = malloc(sizeof(double) * N);
    double *y = malloc(sizeof(double) * N);
    for (i = 0; i < N; i++) {
        x[i] = (double)(i % N) / N;
        for (j = 0; j < N; j++) {
            A[i][j] = (double)((i * j + 1) % N) / N;
            B[i][j] = (double)((i * j + 2) % N) / N;
        }
    }
    kernel_gesummv(N, 1.5, 1.2, A, B, tmp, x, y);
    print_array("y", y, N);
    print_array("tmp", tmp, N);
    free(A);
    free(B);
    free(tmp);
    free(x);
    free(y);
    return 0;
}
