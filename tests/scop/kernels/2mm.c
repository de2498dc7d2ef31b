/* 2mm: D = alpha * A * B * C + beta * D, through tmp = alpha * A * B */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef NI
#define NI 80
#endif
#ifndef NJ
#define NJ 70
#endif
#ifndef NK
#define NK 90
#endif
#ifndef NL
#define NL 100
#endif

static void kernel_2mm(int ni, int nj, int nk, int nl, double alpha, double beta,
                       double tmp[SZ(NI, ni)][SZ(NJ, nj)], double A[SZ(NI, ni)][SZ(NK, nk)],
                       double B[SZ(NK, nk)][SZ(NJ, nj)], double C[SZ(NJ, nj)][SZ(NL, nl)],
                       double D[SZ(NI, ni)][SZ(NL, nl)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(NI, ni); i++)
        for (j = 0; j < SZ(NJ, nj); j++) {
            tmp[i][j] = 0.0;
            for (k = 0; k < SZ(NK, nk); ++k)
                tmp[i][j] += alpha * A[i][k] * B[k][j];
        }
    for (i = 0; i < SZ(NI, ni); i++)
        for (j = 0; j < SZ(NL, nl); j++) {
            D[i][j] *= beta;
            for (k = 0; k < SZ(NJ, nj); ++k)
                D[i][j] += tmp[i][k] * C[k][j];
        }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*tmp)[NJ] = malloc(sizeof(double) * NI * NJ);
    double (*A)[NK] = malloc(sizeof(double) * NI * NK);
    double (*B)[NJ] = malloc(sizeof(double) * NK * NJ);
    double (*C)[NL] = malloc(sizeof(double) * NJ * NL);
    double (*D)[NL] = malloc(sizeof(double) * NI * NL);
    for (i = 0; i < NI; i++)
        for (j = 0; j < NK; j++)
            A[i][j] = (double)((i * j + 1) % NI) / NI;
    for (i = 0; i < NK; i++)
        for (j = 0; j < NJ; j++)
            B[i][j] = (double)(i * (j + 1) % NJ) / NJ;
    for (i = 0; i < NJ; i++)
        for (j = 0; j < NL; j++)
            C[i][j] = (double)((i * (j + 3) + 1) % NL) / NL;
    for (i = 0; i < NI; i++)
        for (j = 0; j < NL; j++)
            D[i][j] = (double)(i * (j + 2) % NK) / NK;
    kernel_2mm(NI, NJ, NK, NL, 1.5, 1.2, tmp, A, B, C, D);
    print_array("tmp", &tmp[0][0], (long)NI * NJ);
    print_array("D", &D[0][0], (long)NI * NL);
    free(tmp);
    free(A);
    free(B);
    free(C);
    free(D);
    return 0;
}
