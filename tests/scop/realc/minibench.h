/* minibench.h: a benchmark harness header written in PolyBench/C 4.2.1's style (its macro
 * names with a MINIBENCH_ prefix), so the tests exercise what real PolyBench kernels
 * contain without shipping PolyBench: array macros that become fixed-size parameters,
 * heap arrays through casts of an allocator, parametric loop bounds, SCALAR_VAL, and dump
 * macros that expand to glibc's stdout/stderr. */
#ifndef MINIBENCH_H
# define MINIBENCH_H

# include <stdlib.h>
# include <stdio.h>

# ifndef MINIBENCH_PADDING_FACTOR
#  define MINIBENCH_PADDING_FACTOR 0
# endif

# ifdef MINIBENCH_USE_C99_PROTO
#  define MINIBENCH_C99_SELECT(x,y) y
# else
#  define MINIBENCH_C99_SELECT(x,y) x
# endif

# ifdef MINIBENCH_USE_SCALAR_LB
#  define MINIBENCH_LOOP_BOUND(x,y) x
# else
#  define MINIBENCH_LOOP_BOUND(x,y) y
# endif

# ifdef MINIBENCH_USE_RESTRICT
#  define MINIBENCH_RESTRICT restrict
# else
#  define MINIBENCH_RESTRICT
# endif

# define MINIBENCH_ARRAY(x) *x
# define MINIBENCH_FREE_ARRAY(x) free((void*)x);
# define MINIBENCH_DECL_VAR(x) (*x)

# define MINIBENCH_1D(var, dim1,ddim1) var[MINIBENCH_RESTRICT MINIBENCH_C99_SELECT(dim1,ddim1) + MINIBENCH_PADDING_FACTOR]
# define MINIBENCH_2D(var, dim1, dim2, ddim1, ddim2) var[MINIBENCH_RESTRICT MINIBENCH_C99_SELECT(dim1,ddim1) + MINIBENCH_PADDING_FACTOR][MINIBENCH_C99_SELECT(dim2,ddim2) + MINIBENCH_PADDING_FACTOR]
# define MINIBENCH_1D_F(var, dim1,ddim1) var[MINIBENCH_C99_SELECT(dim1,ddim1) + MINIBENCH_PADDING_FACTOR]
# define MINIBENCH_2D_F(var, dim1, dim2, ddim1, ddim2) var[MINIBENCH_C99_SELECT(dim1,ddim1) + MINIBENCH_PADDING_FACTOR][MINIBENCH_C99_SELECT(dim2,ddim2) + MINIBENCH_PADDING_FACTOR]

# define MINIBENCH_ALLOC_1D_ARRAY(n1, type)	\
  (type(*)[n1 + MINIBENCH_PADDING_FACTOR])minibench_alloc_data (n1 + MINIBENCH_PADDING_FACTOR, sizeof(type))
# define MINIBENCH_ALLOC_2D_ARRAY(n1, n2, type)		\
  (type(*)[n1 + MINIBENCH_PADDING_FACTOR][n2 + MINIBENCH_PADDING_FACTOR])minibench_alloc_data ((n1 + MINIBENCH_PADDING_FACTOR) * (n2 + MINIBENCH_PADDING_FACTOR), sizeof(type))

# define MINIBENCH_1D_ARRAY_DECL(var, type, dim1, ddim1)		\
  type MINIBENCH_1D_F(MINIBENCH_DECL_VAR(var), dim1, ddim1); \
  var = MINIBENCH_ALLOC_1D_ARRAY(MINIBENCH_C99_SELECT(dim1, ddim1), type);
# define MINIBENCH_2D_ARRAY_DECL(var, type, dim1, dim2, ddim1, ddim2)	\
  type MINIBENCH_2D_F(MINIBENCH_DECL_VAR(var), dim1, dim2, ddim1, ddim2); \
  var = MINIBENCH_ALLOC_2D_ARRAY(MINIBENCH_C99_SELECT(dim1, ddim1), MINIBENCH_C99_SELECT(dim2, ddim2), type);

/* the values go to stdout in %e so the tests compare them at full precision */
# define MINIBENCH_DUMP_TARGET stdout
# define MINIBENCH_DUMP_START    fprintf(stderr, "==BEGIN DUMP_ARRAYS==\n")
# define MINIBENCH_DUMP_FINISH   fprintf(stderr, "==END   DUMP_ARRAYS==\n")
# define MINIBENCH_DUMP_BEGIN(s) fprintf(stderr, "begin dump: %s", s)
# define MINIBENCH_DUMP_END(s)   fprintf(stderr, "\nend   dump: %s\n", s)

# define minibench_prevent_dce(func) func

# define minibench_start_instruments
# define minibench_stop_instruments

extern void* minibench_alloc_data(unsigned long long int n, int elt_size);

#endif /* !MINIBENCH_H */
