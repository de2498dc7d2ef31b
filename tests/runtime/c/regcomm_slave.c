/* Kernels of the register communication suite (SW26010: putr/getr along a row, putc/getc
 * along a column, destination 8 = the other 7). */
#include <slave.h>
#include <simd.h>
#include "regcomm.h"

typedef volatile int reply_t;
#define PUT(m, l, len, rp) athread_put(PE_MODE, (l), (m), (len), (void *)(rp), 0, 0)
#define GET(l, m, len, rp) athread_get(PE_MODE, (m), (l), (len), (void *)(rp), 0, 0, 0)

/* A ring shift along the row, then an all-gather of the 64 ids: 8 broadcast rounds along the
 * row, 8 along the column. Each CPE also writes its block of out by DMA before the ring and
 * reads its left neighbour's after it: the message orders the two (no race, no barrier). */
void k_rc_ok(void *arg)
{
    rpara_t *p = arg;
    int id = _MYID, row = _ROW, col = _COL;
    long v = id, x = 0, left, rowsum = 0, all = 0;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    for (int i = 0; i < 64; i++) b[i] = (float)id;
    PUT(p->out + 64 * id, b, 256, &r);
    swemu_reply_wait(&r, 1);
    REG_PUTR(v, (col + 1) % 8);
    REG_GETR(left);
    GET(b, p->out + 64 * (row * 8 + (col + 7) % 8), 256, &r);
    swemu_reply_wait(&r, 2);
    if (b[63] != (float)left) left = -1;
    athread_syn(ROW_SCOPE, 0xff);          /* the ring's messages before the rounds' */
    for (int s = 0; s < 8; s++) {
        if (s == col) { REG_PUTR(v, 8); x = v; }
        else REG_GETR(x);
        rowsum += x;
    }
    for (int s = 0; s < 8; s++) {
        if (s == row) { REG_PUTC(rowsum, 8); x = rowsum; }
        else REG_GETC(x);
        all += x;
    }
    *(long *)b = all * 1000 + left;
    PUT(p->sums + id, b, 8, &r);
    swemu_reply_wait(&r, 3);
    ldm_free(b, 256);
}

/* The message is put before the DMA write it should announce: the neighbour's read races. */
void k_rc_early(void *arg)
{
    rpara_t *p = arg;
    int id = _MYID, row = _ROW, col = _COL;
    long left;
    float *b = ldm_malloc(256);
    reply_t r = 0;
    for (int i = 0; i < 64; i++) b[i] = (float)id;
    REG_PUTR((long)id, (col + 1) % 8);
    PUT(p->out + 64 * id, b, 256, &r);
    swemu_reply_wait(&r, 1);
    REG_GETR(left);
    GET(b, p->out + 64 * (row * 8 + (col + 7) % 8), 256, &r);
    swemu_reply_wait(&r, 2);
    (void)left;
    ldm_free(b, 256);
}

/* 32-byte messages (a whole intv8 register): the row's ids, one broadcast per CPE. */
void k_rc_vector(void *arg)
{
    rpara_t *p = arg;
    int col = _COL, id = _MYID;
    long *o = ldm_malloc(32);
    reply_t r = 0;
    intv8 v = {id, id, id, id, id, id, id, id}, x;
    int s, tot = 0;
    for (s = 0; s < 8; s++) {
        if (s == col) { REG_PUTR(v, 8); x = v; }
        else REG_GETR(x);
        tot += x[s];
    }
    o[0] = tot;
    PUT(p->sums + id, o, 8, &r);
    swemu_reply_wait(&r, 1);
    ldm_free(o, 32);
}

/* 10 messages to the right neighbour through a 4-deep buffer, alternating puts and gets. */
void k_rc_flow(void *arg)
{
    rpara_t *p = arg;
    int col = _COL, id = _MYID;
    long *o = ldm_malloc(32), v, tot = 0;
    reply_t r = 0;
    for (int i = 0; i < 10; i++) {
        REG_PUTR((long)(id + i), (col + 1) % 8);
        REG_GETR(v);
        tot += v;
    }
    o[0] = tot;
    PUT(p->sums + id, o, 8, &r);
    swemu_reply_wait(&r, 1);
    ldm_free(o, 32);
}

void k_rc_deadlock(void *arg)            /* CPE 9 waits for a message nobody sends */
{
    long x;
    (void)arg;
    if (_MYID == 9) REG_GETC(x);
}

void k_rc_full(void *arg)                /* every CPE puts 5 before it gets: the buffers fill */
{
    long x;
    (void)arg;
    for (int i = 0; i < 5; i++) REG_PUTR((long)i, (_COL + 1) % 8);
    for (int i = 0; i < 5; i++) REG_GETR(x);
}

void k_rc_unreceived(void *arg)          /* CPE 0 sends to CPE 1, which never takes it */
{
    (void)arg;
    if (_MYID == 0) REG_PUTR(1L, 1);
    athread_syn(ARRAY_SCOPE, 0xffff);
}

void k_rc_self(void *arg) { (void)arg; if (_MYID == 3) REG_PUTR(1L, 3); }
void k_rc_dst(void *arg) { (void)arg; if (_MYID == 3) REG_PUTC(1L, 9); }

void k_rc_unordered(void *arg)           /* CPE 0 and CPE 2 both send to CPE 1 */
{
    long x;
    (void)arg;
    if (_MYID == 0 || _MYID == 2) REG_PUTR((long)_MYID, 1);
    if (_MYID == 1) { REG_GETR(x); REG_GETR(x); }
}

void k_rc_gone(void *arg)                /* CPE 1 returns at once; CPE 0 sends to it */
{
    (void)arg;
    if (_MYID == 0) REG_PUTR(1L, 1);
}

/* The traffic of a SUMMA step on the mesh, 8 times: the CPE of column s broadcasts
 * RC_SUMMA_MSGS vectors along its row, then the CPE of row s along its column; every other
 * CPE takes them. Each CPE sums the sender ids it received (benchmarks/regcomm_throughput.py
 * times this kernel). */
void k_rc_summa(void *arg)
{
    rpara_t *p = arg;
    int row = _ROW, col = _COL, id = _MYID;
    long *o = ldm_malloc(32), tot = 0;
    reply_t r = 0;
    intv8 v = {id, id, id, id, id, id, id, id}, x;
    for (int s = 0; s < 8; s++) {
        for (int i = 0; i < RC_SUMMA_MSGS; i++) {
            if (col == s) REG_PUTR(v, 8);
            else { REG_GETR(x); tot += x[i % 8]; }
        }
        for (int i = 0; i < RC_SUMMA_MSGS; i++) {
            if (row == s) REG_PUTC(v, 8);
            else { REG_GETC(x); tot += x[i % 8]; }
        }
    }
    o[0] = tot;
    PUT(p->sums + id, o, 8, &r);
    swemu_reply_wait(&r, 1);
    ldm_free(o, 32);
}

/* The modelled clock (timing.c): CPE 0 streams RC_CLOCK_MSGS messages to CPE 1 after an array
 * barrier; each writes the cycles its part took to sums[id]. */
void k_rc_clock(void *arg)
{
    rpara_t *p = arg;
    long v = 0, *b = ldm_malloc(64);
    unsigned long t0;
    reply_t r = 0;
    athread_syn(ARRAY_SCOPE, 0xffff);
    t0 = swemu_rtc();
    for (int i = 0; i < RC_CLOCK_MSGS; i++) {
        if (_MYID == 0) REG_PUTR(v, 1);
        else if (_MYID == 1) REG_GETR(v);
    }
    b[0] = (long)(swemu_rtc() - t0);
    PUT(p->sums + _MYID, b, 8, &r);
    swemu_reply_wait(&r, 1);
    ldm_free(b, 64);
}
