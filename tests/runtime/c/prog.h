/* Shared by the runtime test program's host and slave files. */
#define NF 4096                  /* floats per array */

typedef struct {
    float *in, *out, *out2, *out3, *out4;   /* NF floats each */
    int *shared, *res, *tl;          /* 3 * 64 ints each */
    long heap1, heap2;               /* sizes for the LDM overflow kernel */
} para_t;
