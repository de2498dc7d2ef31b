/* syrk: C = alpha * A * A^T + beta * C on the lower triangle of C */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 100
#endif
#ifndef M
#define M 80
#endif

static void kernel_syrk(int n, int m, double alpha, double beta, double C[SZ(N, n)][SZ(N, n)],
                        double A[SZ(N, n)][SZ(M, m)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(N, n); i++) {
        for (j = 0; j <= i; j++)
            C[i][j] *= beta;
        for (k = 0; k < SZ(M, m); k++)
            for (j = 0; j <= i; j++)
                C[i][j] += alpha * A[i][k] * A[j][k];
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*C)[N] = malloc(sizeof(double) * N * N);
    double (*A)[M] = malloc(sizeof(double) * N * M);
    for (i = 0; i < N; i++)
        for (j = 0; j < M; j++)
            A[i][j] = (double)((i * j + 1) % N) / N;
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            C[i][j] = (double)((i * j + 2) % M) / M;
    kernel_syrk(N, M, 1.5, 1.2, C, A);
    print_array("C", &C[0][0], (long)N * N);
    free(C);
    free(A);
    return 0;
}
