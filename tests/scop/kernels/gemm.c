/* gemm: C = alpha * A * B + beta * C */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef NI
#define NI 100
#endif
#ifndef NJ
#define NJ 90
#endif
#ifndef NK
#define NK 110
#endif

static void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                        double C[SZ(NI, ni)][SZ(NJ, nj)], double A[SZ(NI, ni)][SZ(NK, nk)],
                        double B[SZ(NK, nk)][SZ(NJ, nj)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(NI, ni); i++) {
        for (j = 0; j < SZ(NJ, nj); j++)
            C[i][j] *= beta;
        for (k = 0; k < SZ(NK, nk); k++)
            for (j = 0; j < SZ(NJ, nj); j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
    }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*A)[NK] = malloc(sizeof(double) * NI * NK);
    double (*B)[NJ] = malloc(sizeof(double) * NK * NJ);
    double (*C)[NJ] = malloc(sizeof(double) * NI * NJ);
    for (i = 0; i < NI; i++)
        for (j = 0; j < NK; j++)
            A[i][j] = (double)((i * (j + 1)) % NK) / NK;
    for (i = 0; i < NK; i++)
        for (j = 0; j < NJ; j++)
            B[i][j] = (double)((i * (j + 2)) % NJ) / NJ;
    for (i = 0; i < NI; i++)
        for (j = 0; j < NJ; j++)
            C[i][j] = (double)((i * j + 1) % NI) / NI;
    kernel_gemm(NI, NJ, NK, 1.5, 1.2, C, A, B);
    print_array("C", &C[0][0], (long)NI * NJ);
    free(A);
    free(B);
    free(C);
    return 0;
}
