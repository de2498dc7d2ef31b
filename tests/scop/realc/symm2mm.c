/* symm2mm.c: kernels written the way PolyBench/C 4.2.1 writes them (minibench.h is its
 * harness in miniature): glibc headers, fixed-size array parameters with padding, heap
 * arrays through casts of the allocator, parametric loop bounds, a scalar temporary, static
 * and inline functions, restrict, __attribute__, a GNU statement expression outside the
 * regions, a C99 VLA parameter, and regions in several functions including main. */
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <math.h>

#include <minibench.h>

#if !defined(MINI_DATASET) && !defined(SMALL_DATASET)
# define MINI_DATASET
#endif
#ifdef MINI_DATASET
# define M 20
# define N 30
# define NK 26
#endif
#ifdef SMALL_DATASET
# define M 60
# define N 70
# define NK 81
#endif
#define _PB_M MINIBENCH_LOOP_BOUND(M,m)
#define _PB_N MINIBENCH_LOOP_BOUND(N,n)
#define _PB_NK MINIBENCH_LOOP_BOUND(NK,nk)
#define DATA_TYPE double
#define DATA_PRINTF_MODIFIER "%.10e "
#define SCALAR_VAL(x) x

static inline __attribute__((always_inline)) double frac(int a, int b) { return (double)(a % b) / b; }

static
void init_array(int m, int n, int nk,
		DATA_TYPE *alpha, DATA_TYPE *beta,
		DATA_TYPE MINIBENCH_2D(C,M,N,m,n),
		DATA_TYPE MINIBENCH_2D(A,M,M,m,m),
		DATA_TYPE MINIBENCH_2D(B,M,N,m,n),
		DATA_TYPE MINIBENCH_2D(D,M,NK,m,nk),
		DATA_TYPE MINIBENCH_2D(E,NK,N,nk,n))
{
  int i, j;
  *alpha = ({ double t_ = 1.5; t_; });
  *beta = SCALAR_VAL(1.2);
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      C[i][j] = frac(i + j, 100);
      B[i][j] = frac(n + i - j, 100);
    }
  for (i = 0; i < m; i++) {
    for (j = 0; j <= i; j++)
      A[i][j] = frac(i + j, 100);
    for (j = i + 1; j < m; j++)
      A[i][j] = -999;
  }
  for (i = 0; i < m; i++)
    for (j = 0; j < nk; j++)
      D[i][j] = frac(i * (j + 1), nk);
  for (i = 0; i < nk; i++)
    for (j = 0; j < n; j++)
      E[i][j] = frac(i * (j + 3) + 1, n);
}

static __attribute__((noinline))
void print_array(int m, int n, DATA_TYPE MINIBENCH_2D(C,M,N,m,n), const char *restrict tag)
{
  int i, j;
  MINIBENCH_DUMP_START;
  MINIBENCH_DUMP_BEGIN(tag);
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      if ((i * m + j) % 20 == 0) fprintf (MINIBENCH_DUMP_TARGET, "\n");
      fprintf (MINIBENCH_DUMP_TARGET, DATA_PRINTF_MODIFIER, C[i][j]);
    }
  MINIBENCH_DUMP_END(tag);
  MINIBENCH_DUMP_FINISH;
}

static
void kernel_symm(int m, int n,
		 DATA_TYPE alpha, DATA_TYPE beta,
		 DATA_TYPE MINIBENCH_2D(C,M,N,m,n),
		 DATA_TYPE MINIBENCH_2D(A,M,M,m,m),
		 DATA_TYPE MINIBENCH_2D(B,M,N,m,n))
{
  int i, j, k;
  DATA_TYPE temp2;

#pragma scop
   for (i = 0; i < _PB_M; i++)
      for (j = 0; j < _PB_N; j++ )
      {
        temp2 = 0;
        for (k = 0; k < i; k++) {
           C[k][j] += alpha*B[i][j] * A[i][k];
           temp2 += B[k][j] * A[i][k];
        }
        C[i][j] = beta * C[i][j] + alpha*B[i][j] * A[i][i] + alpha * temp2;
     }
#pragma endscop
}

static
void kernel_mm(int m, int n, int nk, DATA_TYPE alpha,
	       DATA_TYPE MINIBENCH_2D(F,M,N,m,n),
	       DATA_TYPE MINIBENCH_2D(D,M,NK,m,nk),
	       DATA_TYPE MINIBENCH_2D(E,NK,N,nk,n))
{
  int i, j, k;
#pragma scop
  for (i = 0; i < _PB_M; i++)
    for (j = 0; j < _PB_N; j++)
      {
	F[i][j] = SCALAR_VAL(0.0);
	for (k = 0; k < _PB_NK; ++k)
	  F[i][j] += alpha * D[i][k] * E[k][j];
      }
#pragma endscop
}

static DATA_TYPE w[N];

/* a C99 VLA parameter: extents known only at run time */
static void scale_vla(int m, int n, double X[m][n], double s)
{
  int i, j;
#pragma scop
  for (i = 0; i < m; i++)
    for (j = n - 1; j >= 0; j--)
      X[i][j] = X[i][j] * s + (double)j;
#pragma endscop
}

int main(int argc, char** argv)
{
  int m = M;
  int n = N;
  int nk = NK;
  int i;
  DATA_TYPE alpha;
  DATA_TYPE beta;
  MINIBENCH_2D_ARRAY_DECL(C,DATA_TYPE,M,N,m,n);
  MINIBENCH_2D_ARRAY_DECL(A,DATA_TYPE,M,M,m,m);
  MINIBENCH_2D_ARRAY_DECL(B,DATA_TYPE,M,N,m,n);
  MINIBENCH_2D_ARRAY_DECL(D,DATA_TYPE,M,NK,m,nk);
  MINIBENCH_2D_ARRAY_DECL(E,DATA_TYPE,NK,N,nk,n);
  MINIBENCH_2D_ARRAY_DECL(F,DATA_TYPE,M,N,m,n);
  MINIBENCH_1D_ARRAY_DECL(v,DATA_TYPE,N,n);
  (void)argc; (void)argv;

  for (i = 0; i < n; i++)
    (*v)[i] = frac(i, 7);
  init_array (m, n, nk, &alpha, &beta, MINIBENCH_ARRAY(C), MINIBENCH_ARRAY(A), MINIBENCH_ARRAY(B),
	      MINIBENCH_ARRAY(D), MINIBENCH_ARRAY(E));
  minibench_start_instruments;
  kernel_symm (m, n, alpha, beta, MINIBENCH_ARRAY(C), MINIBENCH_ARRAY(A), MINIBENCH_ARRAY(B));
  kernel_mm (m, n, nk, alpha, MINIBENCH_ARRAY(F), MINIBENCH_ARRAY(D), MINIBENCH_ARRAY(E));
  scale_vla (m, n, *F, 0.5);
  minibench_stop_instruments;
  memcpy(w, *v, sizeof w);
#pragma scop
  for (i = 0; i < _PB_N; i++)
    w[i] = w[i] + alpha * (double)(i * i) / n;
#pragma endscop

  minibench_prevent_dce(print_array(m, n, MINIBENCH_ARRAY(C), "C"));
  minibench_prevent_dce(print_array(m, n, MINIBENCH_ARRAY(F), "F"));
  for (i = 0; i < n; i++)
    fprintf (MINIBENCH_DUMP_TARGET, DATA_PRINTF_MODIFIER, w[i]);

  MINIBENCH_FREE_ARRAY(C);
  MINIBENCH_FREE_ARRAY(A);
  MINIBENCH_FREE_ARRAY(B);
  MINIBENCH_FREE_ARRAY(D);
  MINIBENCH_FREE_ARRAY(E);
  MINIBENCH_FREE_ARRAY(F);
  MINIBENCH_FREE_ARRAY(v);
  return 0;
}
