/* dma_slave.c - CPE kernels of the DMA program: every CPE moves `len` bytes `reps` times
 * between its LDM and its own main-memory region (all 64 at once: the bandwidth they share,
 * as the cost model's curve), contiguous or in `bsize` blocks `stride` bytes apart; and
 * broadcast gets to a mesh row (`width` 8) or the array (64). Result: cycles per CPE. */
#include "calib.h"

void k_dma(void *arg)
{
    calib_params p;
    char *buf, *mem;
    unsigned long t0, t1;
    calib_fetch(&p, arg);
    buf = ldm_malloc(p.len);
    mem = p.mem + (long)_MYID * CALIB_REGION;
    calib_sync_array();
    t0 = calib_rtc();
    for (int r = 0; r < p.reps; r++) calib_dma(p.put, mem, buf, p.len, p.bsize, p.stride);
    t1 = calib_rtc();
    calib_sync_array();
    ldm_free(buf, p.len);
    calib_report(&p, t1 - t0);
}

#ifdef CALIB_V1
/* BCAST_MODE get: in each row (width 8) CPE 0 of the row, or CPE 0 for the array (width 64),
 * fetches `len` bytes into every receiver's buffer; the receivers meet in a barrier after
 * each. Result: cycles of reps (broadcast + barrier). */
void k_bcast(void *arg)
{
    calib_params p;
    char *buf;
    unsigned long t0, t1;
    int issuer;
    calib_fetch(&p, arg);
    issuer = p.width == 8 ? _COL == 0 : _MYID == 0;
    buf = ldm_malloc(p.len);
    calib_sync_array();
    t0 = calib_rtc();
    for (int r = 0; r < p.reps; r++) {
        if (issuer) {
            volatile int reply = 0;
            athread_get(BCAST_MODE, p.mem + (p.width == 8 ? (long)_ROW * CALIB_REGION : 0), buf, p.len,
                        (void *)&reply, (char)(p.width == 8 ? 1 << _ROW : 0xff), 0, 0);
            CALIB_WAIT(reply, 1);
        }
        if (p.width == 8) calib_sync_row();
        else calib_sync_array();
    }
    t1 = calib_rtc();
    calib_sync_array();
    ldm_free(buf, p.len);
    calib_report(&p, t1 - t0);
}
#endif
