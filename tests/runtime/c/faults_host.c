/* Host of the fault suite: `faults KERNEL...` spawns each kernel once on 64 CPEs; after
 * k_clean, k_race* and k_direct_ok it checks out[0..63] = 2 * in[0..63] and prints "ok". */
#include <athread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "faults.h"

#define DECL(k) extern void SLAVE_FUN(k)(void *);
FAULT_KERNELS(DECL)
#define ROW(k) {#k, (void *)SLAVE_FUN(k)},
static const struct { const char *name; void *fn; } table[] = {FAULT_KERNELS(ROW)};

static float in[4096], out[4096];
static void *ptrs[64];
/* never passed to swemu_register: its bounds come from the symbol table (objects.c) */
static float unreg[64];

int main(int argc, char **argv)
{
    fpara_t p = {in, out, ptrs, unreg, malloc(64 * sizeof(float))};
    for (int i = 0; i < 4096; i++) in[i] = (float)i;
    athread_init();
    swemu_register(in, sizeof in, "in");
    swemu_register(out, sizeof out, "out");
    for (int a = 1; a < argc; a++)
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            if (!strcmp(argv[a], table[i].name)) {
                swemu_spawn(table[i].fn, &p, table[i].name);
                athread_join();
            }
    athread_halt();
    if (argc < 2 || (strncmp(argv[1], "k_clean", 7) && strncmp(argv[1], "k_race", 6) && strcmp(argv[1], "k_direct_ok"))) return 0;
    for (int i = 0; i < 64; i++)
        if (out[i] != in[i] * 2) { printf("wrong out[%d] = %g\n", i, out[i]); return 1; }
    printf("ok\n");
    return 0;
}
