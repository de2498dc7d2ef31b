/* syr2k: C = alpha * A * B^T + alpha * B * A^T + beta * C on the lower triangle of C */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 90
#endif
#ifndef M
#define M 70
#endif

static void kernel_syr2k(int n, int m, double alpha, double beta, double C[SZ(N, n)][SZ(N, n)],
                         double A[SZ(N, n)][SZ(M, m)], double B[SZ(N, n)][SZ(M, m)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(N, n); i++) {
        for (j = 0; j <= i; j++)
            C[i][j] *= beta;
        for (k = 0; k < SZ(M, m); k++)
            for (j = 0; j <= i; j++)
                C[i][j] += A[j][k] * alpha * B[i][k] + B[j][k] * alpha * A[i][k];
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*C)[N] = malloc(sizeof(double) * N * N);
    double (*A)[M] = malloc(sizeof(double) * N * M);
    double (*B)[M] = malloc(sizeof(double) * N * M);
    for (i = 0; i < N; i++)
        for (j = 0; j < M; j++) {
            A[i][j] = (double)((i * j + 1) % N) / N;
            B[i][j] = (double)((i * j + 2) % M) / M;
        }
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            C[i][j] = (double)((i * j + 3) % N) / M;
    kernel_syr2k(N, M, 1.5, 1.2, C, A, B);
    print_array("C", &C[0][0], (long)N * N);
    free(C);
    free(A);
    free(B);
    return 0;
}
