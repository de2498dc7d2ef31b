/* Language features the SCoP frontend accepts, in one program: strided and reversed
 * loops, affine if conditions, min-like bounds, math calls, ternaries, a loop-carried
 * recurrence (stays serial), global arrays and a scalar parameter. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "scop_util.h"

#ifndef N
#define N 77
#endif
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static double X[N][N], Y[N][N], R[N], S[N];

static void kernel_features(int n, double scale)
{
    int i, j;
#pragma scop
    for (i = 0; i < SZ(N, n); i += 2)
        for (j = SZ(N, n) - 1; j >= 0; j--)
            Y[i][j] = scale * sqrt(X[i][j]) + (j > i ? 1.0 : -1.0);
    for (i = 1; i < SZ(N, n); i += 2)
        for (j = 0; j < SZ(N, n); j++)
            if (j <= i && j != 3)
                Y[i][j] = fabs(X[i][j] - X[j][i]);
            else
                Y[i][j] = 0.5 * X[i][j];
    for (i = 1; i < SZ(N, n); i++)
        R[i] = R[i - 1] * 0.5 + Y[i][0];
    for (i = 0; i < SZ(N, n); i++)
        for (j = 0; j < MIN(i + 3, SZ(N, n)); j++)
            S[i] = S[i] + Y[j][i] * (double)(i - j);
#pragma endscop
}

int main(void)
{
    int i, j;
    for (i = 0; i < N; i++) {
        R[i] = i % 3;
        S[i] = 1.0 / (i + 1);
        for (j = 0; j < N; j++)
            X[i][j] = (double)((i * 7 + j * 3) % 11);
    }
    kernel_features(N, 0.75);
    print_array("Y", &Y[0][0], (long)N * N);
    print_array("R", R, N);
    print_array("S", S, N);
    return 0;
}
