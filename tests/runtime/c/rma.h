/* RMA suite (tests/runtime/test_rma.py): SW26010-Pro only. X-macro list shared by
 * rma_host.c and rma_slave.c. */
#define RMA_KERNELS(X) \
    X(k_rma_ok) X(k_rma_src_write) X(k_rma_dst_early) X(k_rma_overwait) X(k_rma_unwaited) \
    X(k_rma_unalloc) X(k_rma_free) X(k_rma_dma_src) X(k_rma_clock)

#define RMA_N 256                 /* floats per block */
#define RMA_CHECKS 5              /* results per CPE in k_rma_ok */
#define RMA_CLOCK_BYTES 2450      /* CPE 0 puts this many bytes to CPE 1 in k_rma_clock */

typedef struct {
    float *in;                    /* 32 blocks of RMA_N floats, in[i] = i */
    long *res;                    /* RMA_CHECKS per CPE */
} rmapara_t;
