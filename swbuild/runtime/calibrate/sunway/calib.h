/* calib.h - what the calibration programs need from the chip, in both Athread spellings.
 *
 * The cycle counter: under swbuild's emulation (SWEMU_API_V1 / SWEMU_API_CRTS) the modelled
 * clock swemu_rtc(); on the chip the CPE's `rcsr %0, 4` and the MPE's `rtc` (the spellings
 * of swGEMM and the Athread samples; adapt calib_rtc here if your site's differ).
 * Host files define CALIB_HOST before including this. */
#ifndef CALIB_H
#define CALIB_H

#if defined(SWEMU_API_V1) || defined(SWEMU_API_CRTS)
#define CALIB_EMULATED 1
#define calib_rtc() swemu_rtc()
#elif defined(CALIB_HOST)
static inline unsigned long calib_rtc(void) { unsigned long t; __asm__ volatile("rtc %0" : "=r"(t)); return t; }
#else
static inline unsigned long calib_rtc(void) { unsigned long t; __asm__ volatile("rcsr %0, 4" : "=r"(t)); return t; }
#endif

#if defined(SWEMU_API_CRTS) || defined(CALIB_CRTS)
#define CALIB_API "crts"
#else
#define CALIB_API "athread"
#define CALIB_V1 1
#endif

/* One kernel's parameters: the host fills it, every CPE fetches it first. */
typedef struct {
    char *mem;                /* main memory the kernel moves, CALIB_REGION bytes per CPE */
    unsigned long *out;       /* one result per CPE */
    int len, bsize, stride, reps, put, width;
} calib_params;

#define CALIB_REGION 65536
#define CALIB_MAX_LEN 32768

#ifndef CALIB_HOST
#include <slave.h>

#ifdef CALIB_V1
#ifdef CALIB_EMULATED
#define CALIB_WAIT(r, n) swemu_reply_wait(&(r), (n))
#else
#define CALIB_WAIT(r, n) while ((r) != (n))
/* register communication as the chip's instructions (swGEMM's common_slave.h) */
#define REG_PUTR(var, dst) __asm__ volatile("putr %0,%1\n" ::"r"(var), "r"(dst))
#define REG_GETR(var) __asm__ volatile("getr %0\n" : "=r"(var))
#endif
static inline void calib_dma(int put, void *mem, void *ldm, int len, int bsize, int stride)
{
    volatile int reply = 0;
    if (put) athread_put(PE_MODE, ldm, mem, len, (void *)&reply, stride, bsize);
    else athread_get(PE_MODE, mem, ldm, len, (void *)&reply, 0, stride, bsize);
    CALIB_WAIT(reply, 1);
}
#define calib_sync_row() athread_syn(ROW_SCOPE, 0xff)
#define calib_sync_array() athread_syn(ARRAY_SCOPE, 0xffff)
#else
/* the non-blocking forms and a wait, as generated code uses them */
static inline void calib_dma(int put, void *mem, void *ldm, int len, int bsize, int stride)
{
    crts_rply_t reply = 0;
    if (bsize > 0 && stride > 0) {
        if (put) CRTS_dma_iput_stride(mem, ldm, len, bsize, stride, &reply);
        else CRTS_dma_iget_stride(ldm, mem, len, bsize, stride, &reply);
    } else if (put) CRTS_dma_iput(mem, ldm, len, &reply);
    else CRTS_dma_iget(ldm, mem, len, &reply);
    CRTS_dma_wait_value(&reply, 1);
}
#define calib_sync_row() CRTS_ssync_row()
#define calib_sync_array() CRTS_ssync_array()
#endif

/* The parameters into LDM, and this CPE's result out. */
static inline void calib_fetch(calib_params *p, void *arg) { calib_dma(0, arg, p, sizeof *p, 0, 0); }
__thread_local unsigned long calib_slot;   /* the LDM word a result is put from */
static inline void calib_report(calib_params *p, unsigned long v)
{
    calib_slot = v;
    calib_dma(1, p->out + _MYID, &calib_slot, sizeof calib_slot, 0, 0);
}
#endif
#endif
