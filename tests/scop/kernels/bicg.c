/* bicg: s = A^T * r and q = A * p in one sweep over A */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef M
#define M 100
#endif
#ifndef N
#define N 120
#endif

static void kernel_bicg(int m, int n, double A[SZ(N, n)][SZ(M, m)], double s[SZ(M, m)],
                        double q[SZ(N, n)], double p[SZ(M, m)], double r[SZ(N, n)])
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(M, m); i++)
        s[i] = 0;
    for (i = 0; i < SZ(N, n); i++) {
        q[i] = 0.0;
        for (j = 0; j < SZ(M, m); j++) {
            s[j] = s[j] + r[i] * A[i][j];
            q[i] = q[i] + A[i][j] * p[j];
        }
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[M] = malloc(sizeof(double) * N * M);
    double *s = malloc(sizeof(double) * M);
    double *q = malloc(sizeof(double) * N);
    double *p = malloc(sizeof(double) * M);
    double *r = malloc(sizeof(double) * N);
    for (i = 0; i < M; i++)
        p[i] = (double)(i % M) / M;
    for (i = 0; i < N; i++) {
        r[i] = (double)(i % N) / N;
        for (j = 0; j < M; j++)
            A[i][j] = (double)(i * (j + 1) % N) / N;
    }
    kernel_bicg(M, N, A, s, q, p, r);
    print_array("s", s, M);
    print_array("q", q, N);
    free(A);
    free(s);
    free(q);
    free(p);
    free(r);
    return 0;
}
