/* 3mm: G = (A * B) * (C * D), through E = A * B and F = C * D */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef NI
#define NI 70
#endif
#ifndef NJ
#define NJ 80
#endif
#ifndef NK
#define NK 90
#endif
#ifndef NL
#define NL 60
#endif
#ifndef NM
#define NM 100
#endif

static void kernel_3mm(int ni, int nj, int nk, int nl, int nm,
                       double E[SZ(NI, ni)][SZ(NJ, nj)], double A[SZ(NI, ni)][SZ(NK, nk)],
                       double B[SZ(NK, nk)][SZ(NJ, nj)], double F[SZ(NJ, nj)][SZ(NL, nl)],
                       double C[SZ(NJ, nj)][SZ(NM, nm)], double D[SZ(NM, nm)][SZ(NL, nl)],
                       double G[SZ(NI, ni)][SZ(NL, nl)])
{
    int i, j, k;
#pragma scop
    for (i = 0; i < SZ(NI, ni); i++)
        for (j = 0; j < SZ(NJ, nj); j++) {
            E[i][j] = 0.0;
            for (k = 0; k < SZ(NK, nk); ++k)
                E[i][j] += A[i][k] * B[k][j];
        }
    for (i = 0; i < SZ(NJ, nj); i++)
        for (j = 0; j < SZ(NL, nl); j++) {
            F[i][j] = 0.0;
            for (k = 0; k < SZ(NM, nm); ++k)
                F[i][j] += C[i][k] * D[k][j];
        }
    for (i = 0; i < SZ(NI, ni); i++)
        for (j = 0; j < SZ(NL, nl); j++) {
            G[i][j] = 0.0;
            for (k = 0; k < SZ(NJ, nj); ++k)
                G[i][j] += E[i][k] * F[k][j];
        }
#pragma endscop
}

int main(void)
{
    int i, j;
    double (*E)[NJ] = malloc(sizeof(double) * NI * NJ);
    double (*A)[NK] = malloc(sizeof(double) * NI * NK);
    double (*B)[NJ] = malloc(sizeof(double) * NK * NJ);
    double (*F)[NL] = malloc(sizeof(double) * NJ * NL);
    double (*C)[NM] = malloc(sizeof(double) * NJ * NM);
    double (*D)[NL] = malloc(sizeof(double) * NM * NL);
    double (*G)[NL] = malloc(sizeof(double) * NI * NL);
    for (i = 0; i < NI; i++)
        for (j = 0; j < NK; j++)
            A[i][j] = (double)((i * j + 1) % NI) / (5 * NI);
    for (i = 0; i < NK; i++)
        for (j = 0; j < NJ; j++)
            B[i][j] = (double)((i * (j + 1) + 2) % NJ) / (5 * NJ);
    for (i = 0; i < NJ; i++)
        for (j = 0; j < NM; j++)
            C[i][j] = (double)(i * (j + 3) % NL) / (5 * NL);
    for (i = 0; i < NM; i++)
        for (j = 0; j < NL; j++)
            D[i][j] = (double)((i * (j + 2) + 2) % NK) / (5 * NK);
    kernel_3mm(NI, NJ, NK, NL, NM, E, A, B, F, C, D, G);
    print_array("E", &E[0][0], (long)NI * NJ);
    print_array("F", &F[0][0], (long)NJ * NL);
    print_array("G", &G[0][0], (long)NI * NL);
    free(E);
    free(A);
    free(B);
    free(F);
    free(C);
    free(D);
    free(G);
    return 0;
}
