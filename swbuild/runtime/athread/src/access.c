/* access.c - checks of plain loads and stores of slave code: gcc's -fsanitize=kernel-address
 * in outline mode calls __asan_{load,store}{1,2,4,8,16,N}_noabort before each access.
 * toolchain.py's SWEMU_INSTRUMENT levels: stores only by default, loads too with
 * SWEMU_INSTRUMENT=1, none with 0 (at build time); SWEMU_CHECKS=fast skips them at run time.
 * Page protection (async.c) sees 4 KB pages; this sees bytes:
 *   - an address in the caller's LDM heap must lie in a live ldm_malloc block (granules);
 *   - another CPE's LDM (heap or stack) is not addressable;
 *   - a get destination / put source in flight (on pages async.c could not protect);
 *   - a 16/32/64-byte access (a vector dereference) must be aligned to its size;
 *   - main memory: direct reads and writes join the DMA ranges of race.c (conflicts, races).
 * Host code and the emulator are not instrumented.
 */
#include "swemu_int.h"

#include <string.h>

static inline int live(swemu_cpe *c, size_t off, size_t n)
{
    size_t g0 = off / SWEMU_ALIGN, g1 = (off + n - 1) / SWEMU_ALIGN;
    for (size_t g = g0; g <= g1; g++)
        if (!(c->live[g / 8] & (1u << (g % 8)))) return 0;
    return 1;
}

static void __attribute__((noinline, cold, noreturn)) access_fault(swemu_cpe *c, uintptr_t a, size_t n, int w)
{
    const char *acc = w ? "store to" : "load from";
    char d[160];
    if (a >= swemu_stk_lo && a < swemu_stk_hi)
        swemu_die(c, "%s %#lx in the LDM stack of CPE %d: another CPE's LDM is not addressable "
                  "(SW26010: register communication; SW26010-Pro: RMA)", acc, (unsigned long)a,
                  (int)((a - swemu_stk_lo) / swemu_stk_region));
    if ((a - swemu_ldm_lo) / SWEMU_STRIDE != (uintptr_t)c->id)
        swemu_die(c, "%s %#lx in the LDM of CPE %d: another CPE's LDM is not addressable "
                  "(SW26010: register communication; SW26010-Pro: RMA)", acc, (unsigned long)a,
                  (int)((a - swemu_ldm_lo) / SWEMU_STRIDE));
    if ((a - swemu_ldm_lo) % SWEMU_STRIDE >= SWEMU_ARENA)
        swemu_die(c, "%s %#lx: %lu bytes past the end of the %d-byte LDM", acc, (unsigned long)a,
                  (unsigned long)((a - swemu_ldm_lo) % SWEMU_STRIDE - SWEMU_LDM_BYTES), SWEMU_LDM_BYTES);
    (void)n;
    swemu_describe_ldm(c, a, d, sizeof d);
    swemu_die(c, "%s LDM %#lx: %s", acc, (unsigned long)a, d);
}

/* the live block holding [a, a + n) of c's heap, or 0: cached in ok_lo/ok_hi, since loops
 * store into one block many times (ldm.c voids the cache when blocks change) */
static int in_block(swemu_cpe *c, uintptr_t a, size_t n)
{
    uintptr_t base = (uintptr_t)c->ldm;
    if (a + n > base + SWEMU_ARENA || !live(c, a - base, n)) return 0;
    for (int i = 0; i < c->nblk; i++)
        if (a >= base + c->blk[i].off && a + n <= base + c->blk[i].off + c->blk[i].size) {
            c->ok_lo = base + c->blk[i].off;
            c->ok_hi = c->ok_lo + c->blk[i].size;
            break;
        }
    return 1;
}

static inline void check(uintptr_t a, size_t n, int w)
{
    swemu_cpe *c = swemu_self;
    if (!c || !swemu_checks) return;                            /* SWEMU_CHECKS=fast drops these */
    if (a - c->stk_lo < c->stk_hi - c->stk_lo) return;          /* own stack / TLS */
    /* own heap: pages of transfers in flight are protected (a fault reports the access the
     * same way), only the others need the byte-exact test */
    if (a - c->ok_lo < c->ok_hi - c->ok_lo && a + n <= c->ok_hi) {
        if (c->nfill) swemu_check_access(c, a, n, w);
        return;
    }
    if (c->in_emu) return;
    if (a - (uintptr_t)c->ldm < SWEMU_ARENA) {
        if (!in_block(c, a, n)) access_fault(c, a, n, w);
        if (c->nfill) swemu_check_access(c, a, n, w);
        return;
    }
    if ((a >= swemu_ldm_lo && a < swemu_ldm_hi) || (a >= swemu_stk_lo && a < swemu_stk_hi))
        access_fault(c, a, n, w);
    if (swemu_conflicts_on) {                                    /* main memory */
        swemu_enter(c);
        if (w) swemu_record_write(c, a, a + n);
        else swemu_record_read(c, a, a + n);
        swemu_leave(c);
    }
}

static inline void vec(uintptr_t a, size_t n, int w)
{
    if (a & (n - 1)) {
        swemu_cpe *c = swemu_self;
        if (c && !c->in_emu)
            swemu_die(c, "%s of a %zu-byte vector at %#lx: not %zu-byte aligned (a vector pointer "
                      "such as *(floatv4 *)(b + 1)?)", w ? "store" : "load", n, (unsigned long)a, n);
    }
    check(a, n, w);
}

#define SIZED(n) \
    void __asan_load##n##_noabort(uintptr_t a) { check(a, n, 0); } \
    void __asan_store##n##_noabort(uintptr_t a) { check(a, n, 1); }
#define VECTOR(n) \
    void __asan_load##n##_noabort(uintptr_t a) { vec(a, n, 0); } \
    void __asan_store##n##_noabort(uintptr_t a) { vec(a, n, 1); }
SIZED(1) SIZED(2) SIZED(4) SIZED(8) VECTOR(16)
void __asan_loadN_noabort(uintptr_t a, size_t n) { if (n) check(a, n, 0); }
void __asan_storeN_noabort(uintptr_t a, size_t n) { if (n) check(a, n, 1); }
void __asan_handle_no_return(void) {}
/* memcpy/memset/memmove inside slave code, as kernel-address instruments them */
void *__asan_memcpy(void *d, const void *s, size_t n)
{
    if (n) { check((uintptr_t)s, n, 0); check((uintptr_t)d, n, 1); }
    return memcpy(d, s, n);
}
void *__asan_memmove(void *d, const void *s, size_t n)
{
    if (n) { check((uintptr_t)s, n, 0); check((uintptr_t)d, n, 1); }
    return memmove(d, s, n);
}
void *__asan_memset(void *d, int v, size_t n)
{
    if (n) check((uintptr_t)d, n, 1);
    return memset(d, v, n);
}
