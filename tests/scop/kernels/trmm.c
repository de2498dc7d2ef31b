/* trmm: B = alpha * A^T * B, A unit lower triangular, computed in place */
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

static void kernel_trmm(int m, int n, double alpha, double A[SZ(M, m)][SZ(M, m)],
                        double B[SZ(M, m)][SZ(N, n)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(M, m); i++)
        for (j = 0; j < SZ(N, n); j++) {
            for (k = i + 1; k < SZ(M, m); k++)
                B[i][j] += A[k][i] * B[k][j];
            B[i][j] = alpha * B[i][j];
        }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[M] = malloc(sizeof(double) * M * M);
    double (*B)[N] = malloc(sizeof(double) * M * N);
    for (i = 0; i < M; i++) {
        for (j = 0; j < i; j++)
            A[i][j] = (double)((i + j) % M) / (4 * M);
        A[i][i] = 1.0;
        for (j = i + 1; j < M; j++)
            A[i][j] = -999.0;                 /* upper part unused */
        for (j = 0; j < N; j++)
            B[i][j] = (double)((N + (i - j)) % N) / N;
    }
    kernel_trmm(M, N, 1.5, A, B);
    print_array("B", &B[0][0], (long)M * N);
    free(A);
    free(B);
    return 0;
}
