/* crts.h - CPE side of CRTS / athread v2 (SW26010-Pro), emulated by swbuild's libswemu.a.
 * Destination first, and bsize before stride: the reverse of v1's athread_get/put. */
#ifndef SWEMU_CRTS_H
#define SWEMU_CRTS_H

#include "swemu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef volatile int crts_rply_t;
typedef volatile int athread_rply_t;

#define __ldm SWEMU_LDM_VAR          /* LDM variable: one copy per CPE thread */
#define __thread_local SWEMU_LDM_VAR
#define CRTS_MAX_LDM_SIZE SWEMU_LDM_BYTES

#define CRTS_tid ((int)swemu_tid)
#define CRTS_rid ((int)swemu_tid / 8)
#define CRTS_cid ((int)swemu_tid % 8)
#define CRTS_cgn 0
#define _MYID CRTS_tid
#define _PEN CRTS_tid
#define _ROW CRTS_rid
#define _COL CRTS_cid

/* Blocking forms (no reply word) and non-blocking forms (reply += 1 when done). */
int CRTS_dma_get(void *dest, void *src, int len);
int CRTS_dma_put(void *dest, void *src, int len);
int CRTS_dma_get_stride(void *dest, void *src, int len, int bsize, int stride);
int CRTS_dma_put_stride(void *dest, void *src, int len, int bsize, int stride);
int CRTS_dma_iget(void *dest, void *src, int len, crts_rply_t *reply);
int CRTS_dma_iput(void *dest, void *src, int len, crts_rply_t *reply);
int CRTS_dma_iget_stride(void *dest, void *src, int len, int bsize, int stride,
                         crts_rply_t *reply);
int CRTS_dma_iput_stride(void *dest, void *src, int len, int bsize, int stride,
                         crts_rply_t *reply);
/* Waits while *reply < value.  All emulated DMA completes inside the call, so a wait
 * that cannot be satisfied would hang forever: the emulator reports it instead. */
int CRTS_dma_wait_value(crts_rply_t *reply, int value);

/* RMA, LDM to LDM (src/rma.c). Addresses are LDM offsets, the same in every CPE: pass this
 * CPE's pointer to the variable or ldm_malloc block at that offset. l_rply is this CPE's
 * reply word, r_rply the same word in the other CPE(s). iput: l_rply + 1 when l_addr was
 * read, r_rply + 1 in r_tid when the data landed at r_addr there; iget: l_rply + 1 when
 * r_tid's r_addr landed at l_addr, r_rply + 1 in r_tid when it was read. ibcast (row, column,
 * array; the issuer receives too): src to dst of every member, l_rply + 1 when src was read,
 * r_rply + 1 in each member when its dst landed. Wait with CRTS_rma_wait_value (while
 * *rply < value): the emulator lands RMA there. */
int CRTS_rma_iput(void *l_addr, crts_rply_t *l_rply, int len, int r_tid, void *r_addr, crts_rply_t *r_rply);
int CRTS_rma_iget(void *l_addr, crts_rply_t *l_rply, int len, int r_tid, void *r_addr, crts_rply_t *r_rply);
int CRTS_rma_row_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply);
int CRTS_rma_col_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply);
int CRTS_rma_ibcast(void *dst, void *src, crts_rply_t *l_rply, int len, crts_rply_t *r_rply);  /* sic: the vendor's order */
int CRTS_rma_wait_value(crts_rply_t *rply, int value);

void CRTS_ssync_array(void);
void CRTS_ssync_row(void);
void CRTS_ssync_col(void);

#define CRTS_pldm_malloc ldm_malloc
#define CRTS_pldm_free ldm_free
int CRTS_pldm_get_free_size(void);
#define get_allocatable_size CRTS_pldm_get_free_size

/* athread v2 spellings of the same calls */
#define athread_dma_get CRTS_dma_get
#define athread_dma_put CRTS_dma_put
#define athread_dma_get_stride CRTS_dma_get_stride
#define athread_dma_put_stride CRTS_dma_put_stride
#define athread_dma_iget CRTS_dma_iget
#define athread_dma_iput CRTS_dma_iput
#define athread_dma_iget_stride CRTS_dma_iget_stride
#define athread_dma_iput_stride CRTS_dma_iput_stride
#define athread_dma_wait_value CRTS_dma_wait_value
#define athread_ssync_array CRTS_ssync_array

#ifdef __cplusplus
}
#endif
#endif
