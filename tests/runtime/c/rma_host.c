/* Host of the RMA suite: `rma KERNEL...` spawns each kernel once on 64 CPEs; after k_rma_ok
 * it prints "ok" when every CPE's results are right, after k_rma_clock the two CPEs' cycles. */
#include <athread.h>
#include <stdio.h>
#include <string.h>
#include "rma.h"

#define DECL(k) extern void SLAVE_FUN(k)(void *);
RMA_KERNELS(DECL)
#define ROW(k) {#k, (void *)SLAVE_FUN(k)},
static const struct { const char *name; void *fn; } table[] = {RMA_KERNELS(ROW)};

static float in[32 * RMA_N];
static long res[64 * RMA_CHECKS];

static long block_sum(int blk)     /* sum of in[] over block blk, in[i] = i */
{
    long lo = (long)blk * RMA_N;
    return RMA_N * lo + RMA_N * (RMA_N - 1L) / 2;
}

int main(int argc, char **argv)
{
    rmapara_t p = {in, res};
    int bad = 0;
    for (int i = 0; i < 32 * RMA_N; i++) in[i] = (float)i;
    athread_init();
    swemu_register(in, sizeof in, "in");
    swemu_register(res, sizeof res, "res");
    for (int a = 1; a < argc; a++)
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            if (!strcmp(argv[a], table[i].name)) {
                memset(res, 0, sizeof res);
                swemu_spawn(table[i].fn, &p, table[i].name);
                athread_join();
            }
    athread_halt();
    if (argc == 2 && !strcmp(argv[1], "k_rma_ok")) {
        for (int c = 0; c < 64; c++) {
            int row = c / 8, col = c % 8, left = row * 8 + (col + 7) % 8, right = row * 8 + (col + 1) % 8;
            /* row broadcast of block row, column broadcast of block 8 + col, the left
             * neighbour's iput (RMA_N x its id), an iget of the right one's (RMA_N x 2 its id),
             * the array broadcast of block 16 */
            long want[RMA_CHECKS] = {block_sum(row), block_sum(8 + col), RMA_N * (long)left,
                                     2L * RMA_N * right, block_sum(16)};
            for (int k = 0; k < RMA_CHECKS; k++)
                if (res[c * RMA_CHECKS + k] != want[k]) {
                    printf("wrong res[%d][%d] = %ld, want %ld\n", c, k, res[c * RMA_CHECKS + k], want[k]);
                    bad = 1;
                }
        }
        if (!bad) printf("ok\n");
    }
    if (argc == 2 && !strcmp(argv[1], "k_rma_clock"))
        printf("clock %ld %ld\n", res[0], res[1]);
    return bad;
}
