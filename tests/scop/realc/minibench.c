/* minibench.c: the allocator of minibench.h (PolyBench's polybench.c in miniature). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void* minibench_alloc_data(unsigned long long int n, int elt_size)
{
  size_t bytes = (size_t)n * (size_t)elt_size;
  void* ret = NULL;
  if (posix_memalign(&ret, 4096, bytes) != 0 || ret == NULL) {
    fprintf(stderr, "[minibench] cannot allocate %zu bytes\n", bytes);
    exit(1);
  }
  memset(ret, 0, bytes);
  return ret;
}
