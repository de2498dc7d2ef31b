/* symm: C = alpha * A * B + beta * C, A symmetric and stored in its lower triangle
 * (A[i][k] for k <= i, A[k][i] above the diagonal) */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef M
#define M 90
#endif
#ifndef N
#define N 100
#endif

static void kernel_symm(int m, int n, double alpha, double beta, double C[SZ(M, m)][SZ(N, n)],
                        double A[SZ(M, m)][SZ(M, m)], double B[SZ(M, m)][SZ(N, n)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(M, m); i++)
        for (j = 0; j < SZ(N, n); j++) {
            C[i][j] = beta * C[i][j];
            for (k = 0; k <= i; k++)
                C[i][j] += alpha * A[i][k] * B[k][j];
            for (k = i + 1; k < SZ(M, m); k++)
                C[i][j] += alpha * A[k][i] * B[k][j];
        }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*C)[N] = malloc(sizeof(double) * M * N);
    double (*A)[M] = malloc(sizeof(double) * M * M);
    double (*B)[N] = malloc(sizeof(double) * M * N);
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            C[i][j] = (double)((i + j) % 100) / M;
            B[i][j] = (double)((N + i - j) % 100) / M;
        }
    for (i = 0; i < M; i++)
        for (j = 0; j < M; j++)
            A[i][j] = j <= i ? (double)((i + j) % 100) / M : -999.0;   /* upper part unused */
    kernel_symm(M, N, 1.5, 1.2, C, A, B);
    print_array("C", &C[0][0], (long)M * N);
    free(C);
    free(A);
    free(B);
    return 0;
}
