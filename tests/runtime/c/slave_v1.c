/* Slave side of the runtime test program, Athread v1 spelling (source first,
 * stride before bsize, `while (reply != n);`). */
#include <slave.h>
#include <dma.h>
#include <simd.h>
#include "prog.h"

#define CAP SWEMU_LDM_BYTES
#define LDMVAR __thread_local
typedef volatile int reply_t;
#define MYID athread_get_id(-1)
#define GET(l, m, len, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, 0, 0)
#define PUT(m, l, len, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), 0, 0)
#define GETS(l, m, len, bs, gap, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, (gap), (bs))
#define PUTS(m, l, len, bs, gap, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), (gap), (bs))
#define WAIT(rp, n) while (*(rp) != (n))
#define SYNC_ALL() athread_syn(ARRAY_SCOPE, 0xffff)
#define SYNC_ROW() athread_syn(ROW_SCOPE, 0xff)
#define SYNC_COL() athread_syn(COL_SCOPE, 0xff)

/* the id macros must agree with athread_get_id */
#define CHECK_IDS() (_MYID == MYID && _ROW == MYID / 8 && _COL == MYID % 8)

static double vec_extra(int id)          /* 36 * id through doublev4 */
{
    doublev4 a = simd_set_doublev4(1, 2, 3, 4), b = simd_set_doublev4(5, 6, 7, 8);
    return simd_reduc_plusd(simd_vmuld(a + b, simd_set_doublev4(id, id, id, id)));
}

void k_wait(void *arg) { (void)arg; }

#include "slave_common.inc"
