/* redzone.c - stores past the end of an ldm_malloc block, caught without instrumentation.
 *
 * A block of n bytes (granule rounded) at heap offset o sits at arena offset 2 o (ldm.c),
 * so the n bytes after it are outside every block and outside the modelled LDM's
 * accounting.  They are filled with RZ at ldm_malloc and checked at ldm_free, at barriers,
 * when the kernel returns (whole redzones) and at every DMA call (the first 8 bytes: an
 * off-by-one store lands there; more would cost every DMA call).  A store that stays within the block's granule
 * rounding, or jumps a whole redzone, is not seen (SWEMU_INSTRUMENT=1 sees those).
 */
#include "swemu_int.h"

#include <string.h>

#define RZ 0xFD

void swemu_redzone_fill(swemu_cpe *c, const swemu_blk *b)
{
    memset((char *)swemu_em(c->ldm + b->off + b->size), RZ, b->size);
}

void swemu_redzone_check(swemu_cpe *c, const swemu_blk *b, const char *when, size_t bytes)
{
    const unsigned char *z = swemu_em(c->ldm + b->off + b->size);
    size_t n = bytes < b->size ? bytes : b->size, k = 0;
    const uint64_t rz8 = 0x0101010101010101ull * RZ;
    for (; k + 8 <= n; k += 8) {   /* 8 bytes at a time, then find the byte */
        uint64_t v;
        memcpy(&v, z + k, 8);
        if (v != rz8) break;
    }
    for (; k < n; k++)
        if (z[k] != RZ)
            swemu_die(c, "store past the end of ldm_malloc block %#lx of %zu bytes (heap offset "
                      "%zu): LDM %#lx, %zu bytes past its end, holds 0x%02x, not the redzone's "
                      "0x%02x (found at %s)", (unsigned long)(uintptr_t)(c->ldm + b->off), b->req,
                      b->off / 2, (unsigned long)(uintptr_t)(c->ldm + b->off + b->size + k),
                      b->size - b->req + k, z[k], RZ, when);
}

void swemu_redzones(swemu_cpe *c, const char *when, size_t bytes)
{
    for (int i = 0; i < c->nblk; i++) swemu_redzone_check(c, &c->blk[i], when, bytes);
}
