/* mvt: x1 = x1 + A * y1 and x2 = x2 + A^T * y2 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 120
#endif

static void kernel_mvt(int n, double x1[SZ(N, n)], double x2[SZ(N, n)], double y1[SZ(N, n)],
                       double y2[SZ(N, n)], double A[SZ(N, n)][SZ(N, n)])
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < SZ(N, n); j++)
            x1[i] = x1[i] + A[i][j] * y1[j];
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < SZ(N, n); j++)
            x2[i] = x2[i] + A[j][i] * y2[j];
#pragma endscop
}

int main(void)
{
    int i, j;
    double *x1 = malloc(sizeof(double) * N), *x2 = malloc(sizeof(double) * N);
    double *y1 = malloc(sizeof(double) * N), *y2 = malloc(sizeof(double) * N);
    double (*A)[N] = malloc(sizeof(double) * N * N);
    for (i = 0; i < N; i++) {
        x1[i] = (double)(i % N) / N;
        x2[i] = (double)((i + 1) % N) / N;
        y1[i] = (double)((i + 3) % N) / N;
        y2[i] = (double)((i + 4) % N) / N;
        for (j = 0; j < N; j++)
            A[i][j] = (double)(i * j % N) / N;
    }
    kernel_mvt(N, x1, x2, y1, y2, A);
    print_array("x1", x1, N);
    print_array("x2", x2, N);
    free(x1);
    free(x2);
    free(y1);
    free(y2);
    free(A);
    return 0;
}
