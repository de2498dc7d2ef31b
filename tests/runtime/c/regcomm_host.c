/* Host of the register communication suite: `regcomm KERNEL...` spawns each kernel once on
 * 64 CPEs and prints, after k_rc_ok / k_rc_vector / k_rc_flow / k_rc_summa, "ok" when every CPE's result
 * is right. */
#include <athread.h>
#include <stdio.h>
#include <string.h>
#include "regcomm.h"

#define DECL(k) extern void SLAVE_FUN(k)(void *);
RC_KERNELS(DECL)
#define ROW(k) {#k, (void *)SLAVE_FUN(k)},
static const struct { const char *name; void *fn; } table[] = {RC_KERNELS(ROW)};

static float in[4096], out[4096];
static long sums[64];

int main(int argc, char **argv)
{
    rpara_t p = {in, out, sums};
    int bad = 0;
    for (int i = 0; i < 4096; i++) in[i] = (float)i;
    athread_init();
    swemu_register(in, sizeof in, "in");
    swemu_register(out, sizeof out, "out");
    swemu_register(sums, sizeof sums, "sums");
    for (int a = 1; a < argc; a++)
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            if (!strcmp(argv[a], table[i].name)) {
                memset(sums, 0, sizeof sums);
                swemu_spawn(table[i].fn, &p, table[i].name);
                athread_join();
                /* k_rc_ok: every CPE gathered all 64 ids (sum 2016) and its left neighbour's;
                 * k_rc_vector: the row's 8 ids from 32-byte messages; k_rc_flow: 10 values */
                for (int c = 0; c < 64 && a == 1; c++) {
                    long want = !strcmp(argv[1], "k_rc_ok") ? 2016 * 1000 + (c / 8 * 8 + (c + 7) % 8)
                              : !strcmp(argv[1], "k_rc_vector") ? 8 * (c / 8 * 8) + 28
                              : !strcmp(argv[1], "k_rc_flow") ? 10 * (c / 8 * 8 + (c + 7) % 8) + 45
                              /* the other 7 of its row (ids r*8..r*8+7) and of its column */
                              : !strcmp(argv[1], "k_rc_summa") ? RC_SUMMA_MSGS * (8L * (c / 8 * 8) + 28 - c
                                                                                  + 8L * (c % 8) + 224 - c) : sums[c];
                    if (sums[c] != want) { printf("wrong sums[%d] = %ld, want %ld\n", c, sums[c], want); bad = 1; }
                }
            }
    athread_halt();
    if (argc > 1 && !strcmp(argv[1], "k_rc_clock"))     /* the sender's cycles, the receiver's */
        printf("clock %ld %ld\n", sums[0], sums[1]);
    if (!bad && argc > 1 && (!strcmp(argv[1], "k_rc_ok") || !strcmp(argv[1], "k_rc_vector") || !strcmp(argv[1], "k_rc_flow")
                                || !strcmp(argv[1], "k_rc_summa")))
        printf("ok\n");
    return bad;
}
