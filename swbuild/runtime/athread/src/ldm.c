/* ldm.c - each CPE's LDM: ldm_malloc/ldm_free over its own arena, and the address tests
 * DMA uses to tell LDM from main memory.
 *
 * Capacity is shared, as on the chip, by the heap, the static LDM data (__thread_local /
 * __ldm, i.e. the program's TLS) and the stack depth at the time of the call.
 */
#include "swemu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static size_t granule(size_t n)
{
    if (n == 0) n = 1;
    return (n + SWEMU_ALIGN - 1) & ~(size_t)(SWEMU_ALIGN - 1);
}

size_t swemu_stack_depth(swemu_cpe *c)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    return c->entry_sp > sp ? c->entry_sp - sp : 0;
}

/* heap top in the modelled LDM (what capacity counts) */
static size_t heap_top(swemu_cpe *c)
{
    return c->nblk ? c->blk[c->nblk - 1].off / 2 + c->blk[c->nblk - 1].size : 0;
}

/* end of the last block in the arena (pages above it are inaccessible) */
static size_t arena_top(swemu_cpe *c)
{
    return c->nblk ? c->blk[c->nblk - 1].off + c->blk[c->nblk - 1].size : 0;
}

static void mark(swemu_cpe *c, size_t off, size_t size, int on)
{
    c->ok_lo = c->ok_hi = 0;      /* the blocks change: access.c's cached block is void */
    for (size_t g = off / SWEMU_ALIGN; g < (off + size) / SWEMU_ALIGN; g++)
        if (on) c->live[g / 8] |= (unsigned char)(1u << (g % 8));
        else c->live[g / 8] &= (unsigned char)~(1u << (g % 8));
}

/* After the heap changed: arena pages above its top become inaccessible (stores past the
 * last block fault), and the stack's guard moves so that heap + static data + stack never
 * exceed the LDM (page granular: the stack may use up to 4 KB more than is left). */
static void heap_changed(swemu_cpe *c)
{
    size_t top = heap_top(c), pages = (arena_top(c) + SWEMU_PAGE - 1) / SWEMU_PAGE, old = c->top_pages;
    uintptr_t lim = c->entry_sp - (SWEMU_LDM_BYTES - swemu_static_ldm - top);
    lim &= ~(uintptr_t)(SWEMU_PAGE - 1);
    if (lim < c->stk_floor) lim = c->stk_floor;
    if (pages != old) {
        c->top_pages = pages;
        swemu_reprotect(c, pages < old ? pages : old, pages < old ? old : pages);
    }
    if (lim > c->stk_lo) mprotect((void *)c->stk_lo, lim - c->stk_lo, PROT_NONE);
    else if (lim < c->stk_lo) mprotect((void *)lim, c->stk_lo - lim, PROT_READ | PROT_WRITE);
    c->stk_lo = lim;
}

void *ldm_malloc(size_t size)
{
    swemu_cpe *c = swemu_need_cpe("ldm_malloc");
    size_t r, off = 0, top, stack = swemu_stack_depth(c);
    int i;
    swemu_enter(c);          /* no DMA lands (spin timer) while the block list is changed */
    if (size > SWEMU_LDM_BYTES) r = size;   /* fails below without wrapping */
    else r = granule(size);
    /* first fit between live blocks (kept sorted by offset), in heap offsets */
    for (i = 0; i < c->nblk; i++) {
        if (c->blk[i].off / 2 - off >= r) break;
        off = c->blk[i].off / 2 + c->blk[i].size;
    }
    top = off + r > heap_top(c) ? off + r : heap_top(c);
    if (top + swemu_static_ldm + stack > SWEMU_LDM_BYTES)
        swemu_die(c, "LDM overflow: requested %zu bytes, %zu in use, capacity %d bytes "
                  "(heap %zu, static %zu, stack %zu)", size,
                  c->heap_used + swemu_static_ldm + stack, SWEMU_LDM_BYTES,
                  c->heap_used, swemu_static_ldm, stack);
    if (c->nblk == c->blk_cap) {
        c->blk_cap = c->blk_cap ? 2 * c->blk_cap : 16;
        c->blk = realloc(c->blk, c->blk_cap * sizeof *c->blk);
        if (!c->blk) swemu_die(c, "out of memory");
    }
    memmove(&c->blk[i + 1], &c->blk[i], (c->nblk - i) * sizeof *c->blk);
    c->blk[i] = (swemu_blk){2 * off, r, size};
    mark(c, 2 * off, r, 1);
    swemu_redzone_fill(c, &c->blk[i]);
    c->nblk++;
    c->heap_used += r;
    if (top > c->heap_peak) c->heap_peak = top;
    heap_changed(c);
    swemu_leave(c);
    return c->ldm + 2 * off;
}

void ldm_free(void *p, size_t size)
{
    swemu_cpe *c = swemu_need_cpe("ldm_free");
    int i;
    if (!p) return;
    swemu_enter(c);
    for (i = 0; i < c->nblk; i++)
        if (c->ldm + c->blk[i].off == (char *)p) break;
    if (i == c->nblk)
        swemu_die(c, "ldm_free(%p, %zu): not a live ldm_malloc block of this CPE", p, size);
    if (granule(size) != c->blk[i].size)
        swemu_die(c, "ldm_free(%p, %zu): the block was allocated with %zu bytes", p, size,
                  c->blk[i].req);
    swemu_check_free(c, (uintptr_t)p, (uintptr_t)p + c->blk[i].size);
    swemu_rma_check_free(c, (uintptr_t)p, (uintptr_t)p + c->blk[i].size);
    swemu_redzone_check(c, &c->blk[i], "ldm_free", SIZE_MAX);
    mark(c, c->blk[i].off, c->blk[i].size, 0);
    c->heap_used -= c->blk[i].size;
    memmove(&c->blk[i], &c->blk[i + 1], (c->nblk - i - 1) * sizeof *c->blk);
    c->nblk--;
    heap_changed(c);
    swemu_leave(c);
}

int CRTS_pldm_get_free_size(void)
{
    swemu_cpe *c = swemu_need_cpe("CRTS_pldm_get_free_size");
    long f = (long)SWEMU_LDM_BYTES - (long)(heap_top(c) + swemu_static_ldm + swemu_stack_depth(c));
    return f > 0 ? (int)f : 0;
}

void swemu_heap_reset(swemu_cpe *c)
{
    c->leaked += c->heap_used;
    c->heap_used = 0;
    c->nblk = 0;
    memset(c->live, 0, sizeof c->live);
    c->ok_lo = c->ok_hi = 0;
    heap_changed(c);
}

/* [lo, hi) lies in t's LDM: inside one live ldm_malloc block, or in t's stack/TLS.  t is
 * the calling CPE, or another, running one (BCAST_MODE receivers): then its block list is
 * read without locking while its ldm_malloc/ldm_free may change it.  That is sound for the
 * code broadcasts are used in - every receiver allocates, a barrier, then one CPE
 * broadcasts; the snapshot of the count and array pointer only keeps a racing reader from
 * running past the end of the list. */
int swemu_in_ldm(swemu_cpe *t, uintptr_t lo, uintptr_t hi)
{
    uintptr_t base = (uintptr_t)t->ldm;
    int nblk = __atomic_load_n(&t->nblk, __ATOMIC_ACQUIRE);
    swemu_blk *blk = __atomic_load_n(&t->blk, __ATOMIC_ACQUIRE);
    if (lo >= t->stk_lo && hi <= t->stk_hi) return 1;
    if (lo < base || hi > base + SWEMU_ARENA || !blk) return 0;
    for (int i = 0; i < nblk; i++)
        if (lo >= base + blk[i].off && hi <= base + blk[i].off + blk[i].size) return 1;
    return 0;
}

/* Human description of an address for error messages. */
void swemu_where(uintptr_t a, char *buf, size_t n)
{
    if (a >= swemu_ldm_lo && a < swemu_ldm_hi)
        snprintf(buf, n, "in CPE %d's LDM heap", (int)((a - swemu_ldm_lo) / SWEMU_STRIDE));
    else if (a >= swemu_stk_lo && a < swemu_stk_hi)
        snprintf(buf, n, "in CPE %d's LDM stack/static data", (int)((a - swemu_stk_lo) / swemu_stk_region));
    else
        snprintf(buf, n, "in main memory");
}
