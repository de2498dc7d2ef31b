/* The fault suite (tests/runtime/test_faults.py): one small kernel per rule, plus clean
 * kernels that must stay silent.  X-macro list shared by faults_host.c and faults_slave.c. */
#define FAULT_KERNELS(X) \
    X(k_clean) X(k_read_early) X(k_reuse) X(k_put_src) X(k_no_wait) X(k_stack_early) \
    X(k_heap_stack) X(k_past_block) X(k_past_ldm) X(k_other_ldm) X(k_len3) X(k_mem_off1) \
    X(k_ldm_off1) X(k_stack_overrun) X(k_vec_misalign) X(k_wait_past) X(k_free_in_flight) \
    X(k_put_then_get) X(k_race) X(k_race_ok) X(k_plain_other) X(k_plain_other_stack) \
    X(k_plain_past) X(k_direct_same_word) X(k_direct_race) X(k_wild_mem) X(k_rz_free) X(k_rz_dma) \
    X(k_rz_sync) X(k_rz_exact) X(k_direct_ok) X(k_load_past) \
    X(k_race_chain) X(k_race_row) X(k_global_past) X(k_heap_past)

typedef struct {
    float *in, *out;            /* 4096 floats each */
    void **ptrs;                /* 64 pointers for CPEs to exchange */
    float *unreg;               /* 64 floats of a static array nobody registered */
    float *heap;                /* 64 floats of a malloc block nobody registered */
} fpara_t;
