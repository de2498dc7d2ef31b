/* doitgen: A[r][q][:] = A[r][q][:] * C4, through sum (one row of sum per (r, q)) */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef NR
#define NR 20
#endif
#ifndef NQ
#define NQ 18
#endif
#ifndef NP
#define NP 30
#endif

static void kernel_doitgen(int nr, int nq, int np, double A[SZ(NR, nr)][SZ(NQ, nq)][SZ(NP, np)],
                           double C4[SZ(NP, np)][SZ(NP, np)],
                           double sum[SZ(NR, nr)][SZ(NQ, nq)][SZ(NP, np)])
{
    int r, q, p, s;
#pragma scop
    for (r = 0; r < SZ(NR, nr); r++)
        for (q = 0; q < SZ(NQ, nq); q++) {
            for (p = 0; p < SZ(NP, np); p++) {
                sum[r][q][p] = 0.0;
                for (s = 0; s < SZ(NP, np); s++)
                    sum[r][q][p] += A[r][q][s] * C4[s][p];
            }
            for (p = 0; p < SZ(NP, np); p++)
                A[r][q][p] = sum[r][q][p];
        }
#pragma endscop
}

int main(void)
{
    int i, j, k;
    double (*A)[NQ][NP] = malloc(sizeof(double) * NR * NQ * NP);
    double (*sum)[NQ][NP] = malloc(sizeof(double) * NR * NQ * NP);
    double (*C4)[NP] = malloc(sizeof(double) * NP * NP);
    for (i = 0; i < NR; i++)
        for (j = 0; j < NQ; j++)
            for (k = 0; k < NP; k++)
                A[i][j][k] = (double)((i * j + k) % NP) / NP;
    for (i = 0; i < NP; i++)
        for (j = 0; j < NP; j++)
            C4[i][j] = (double)(i * j % NP) / NP;
    kernel_doitgen(NR, NQ, NP, A, C4, sum);
    print_array("A", &A[0][0][0], (long)NR * NQ * NP);
    free(A);
    free(sum);
    free(C4);
    return 0;
}
