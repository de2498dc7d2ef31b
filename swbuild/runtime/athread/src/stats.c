/* stats.c - per-kernel counters and the SWEMU_STATS JSON file (written to a temporary
 * file and renamed into place, so readers never see half a document). */
#include "swemu_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static swemu_kstat *ks;
static int nks, ks_cap;

swemu_kstat *swemu_kernel_stat(const char *name)
{
    for (int i = 0; i < nks; i++)
        if (!strcmp(ks[i].name, name)) return &ks[i];
    if (nks == ks_cap) {
        ks_cap = ks_cap ? 2 * ks_cap : 16;
        ks = realloc(ks, ks_cap * sizeof *ks);
        if (!ks) swemu_die(NULL, "out of memory");
    }
    memset(&ks[nks], 0, sizeof *ks);
    ks[nks].name = strdup(name);
    return &ks[nks++];
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

void swemu_write_stats(void)
{
    const char *path = getenv("SWEMU_STATS");
    char *tmp;
    FILE *f;
    int ok;
    if (!path || !*path) return;
    tmp = malloc(strlen(path) + 32);
    sprintf(tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!(f = fopen(tmp, "w"))) {
        fprintf(stderr, "swemu: warning: cannot write SWEMU_STATS=%s: %s\n", tmp, strerror(errno));
        free(tmp);
        return;
    }
    static const char *modes[] = {"issue", "wait", "random"}, *checks[] = {"fast", "all", "full"};
    fprintf(f, "{\"api\": \"%s\", \"cpes\": %d, \"ldm_bytes\": %d, \"ldm_static_bytes\": %zu, "
            "\"main_memory_objects\": %zu, \"dma_mode\": \"%s\", \"checks\": \"%s\", \"checks_dropped\": [%s], \"kernels\": [",
#ifdef SWEMU_API_CRTS
            "crts",
#else
            "athread",
#endif
            SWEMU_CPES, SWEMU_LDM_BYTES, swemu_static_ldm, swemu_objects, modes[swemu_dma_mode], checks[swemu_checks],
            swemu_checks ? "" : "\"page protection of LDM buffers with DMA in flight (early reads give "
            "0xFF data, early writes are still reported when the DMA lands)\", \"checks of plain loads and "
            "stores (another CPE's LDM, outside ldm_malloc blocks, direct main-memory conflicts and races; "
            "redzones still catch stores just past a block)\"");
    for (int i = 0; i < nks; i++) {
        swemu_kstat *k = &ks[i];
        int first = 1;
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        json_str(f, k->name);
        fprintf(f, ", \"spawns\": %llu, \"dma\": {\"get\": {\"ops\": %llu, \"bytes\": %llu}, "
                "\"put\": {\"ops\": %llu, \"bytes\": %llu}}, \"dma_hist\": {",
                (unsigned long long)k->spawns, (unsigned long long)k->get_ops,
                (unsigned long long)k->get_bytes, (unsigned long long)k->put_ops,
                (unsigned long long)k->put_bytes);
        for (int b = 0; b < SWEMU_HIST; b++)
            if (k->hist[b]) {
                fprintf(f, "%s\"%llu\": %llu", first ? "" : ", ", 1ULL << b,
                        (unsigned long long)k->hist[b]);
                first = 0;
            }
        fprintf(f, "}, \"ldm_peak_bytes\": %zu, \"ldm_leaked_bytes\": %llu, \"write_conflicts\": %llu, "
                "\"races\": %llu, \"regcomm\": {\"puts\": %llu, \"gets\": %llu, \"putr\": %llu, "
                "\"getr\": %llu, \"putc\": %llu, \"getc\": %llu}, \"seconds\": %.6f",
                k->peak, (unsigned long long)k->leaked, (unsigned long long)k->conflicts,
                (unsigned long long)k->races, (unsigned long long)(k->rc_puts[0] + k->rc_puts[1]),
                (unsigned long long)(k->rc_gets[0] + k->rc_gets[1]), (unsigned long long)k->rc_puts[0],
                (unsigned long long)k->rc_gets[0], (unsigned long long)k->rc_puts[1],
                (unsigned long long)k->rc_gets[1], k->seconds);
        /* RMA (rma.c): operations per form at the issuer, bytes read from sources, bytes landed */
        fprintf(f, ", \"rma\": {\"iput\": %llu, \"iget\": %llu, \"row_ibcast\": %llu, \"col_ibcast\": %llu, "
                "\"ibcast\": %llu, \"bytes\": %llu, \"recv_bytes\": %llu}}",
                (unsigned long long)k->rma_ops[0], (unsigned long long)k->rma_ops[1],
                (unsigned long long)k->rma_ops[2], (unsigned long long)k->rma_ops[3],
                (unsigned long long)k->rma_ops[4], (unsigned long long)k->rma_bytes,
                (unsigned long long)k->rma_recv_bytes);
    }
    fprintf(f, "%s]}\n", nks ? "\n" : "");
    ok = !ferror(f);
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        fprintf(stderr, "swemu: warning: cannot write SWEMU_STATS=%s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
}
