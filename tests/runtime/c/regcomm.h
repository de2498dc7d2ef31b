/* Register communication suite (tests/runtime/test_regcomm.py): SW26010 only. X-macro list
 * shared by regcomm_host.c and regcomm_slave.c. */
#define RC_KERNELS(X) \
    X(k_rc_ok) X(k_rc_early) X(k_rc_vector) X(k_rc_flow) X(k_rc_deadlock) X(k_rc_full) X(k_rc_unreceived) \
    X(k_rc_self) X(k_rc_dst) X(k_rc_unordered) X(k_rc_gone) X(k_rc_summa) X(k_rc_clock)

#define RC_SUMMA_MSGS 1000        /* messages per broadcast in k_rc_summa */
#define RC_CLOCK_MSGS 10          /* messages CPE 0 streams to CPE 1 in k_rc_clock */

typedef struct {
    float *in, *out;            /* 4096 floats each */
    long *sums;                 /* 64 per-CPE results */
} rpara_t;
