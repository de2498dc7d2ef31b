/* objects.c - bounds of the program's main-memory objects, from its own ELF symbol table.
 *
 * Hand-written Athread code (a user's SCoP harness) does not call swemu_register, yet its
 * static and global arrays have exact bounds in the executable's .symtab (STT_OBJECT symbols
 * with their st_size, local `static` ones included). athread_init reads them from
 * /proc/self/exe (the load bias of a PIE from dl_iterate_phdr's first object, the program);
 * every DMA's main-memory side that starts inside one object must end inside it: a transfer
 * running into the next object is an error naming both. A stripped program has no .symtab:
 * nothing is checked then (the stats file says how many objects were read).
 *
 * Heap blocks: the program's malloc, calloc, realloc, free and aligned allocations are
 * these wrappers (an executable's definition interposes glibc's, which they call through
 * its __libc_* entry points), so every live block's bounds are known too: a DMA that starts
 * in a block must end in it. Shared libraries' own arrays are not covered.
 */
#include "swemu_int.h"

#include <elf.h>
#include <sched.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { uintptr_t lo, hi; const char *name; } swemu_obj;
static swemu_obj *objs;
static size_t nobjs;
size_t swemu_objects;     /* objects read (stats.c) */

static int bias_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr;
    return 1;   /* the first object is the program itself */
}

static int by_lo(const void *a, const void *b)
{
    const swemu_obj *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->hi > y->hi) - (x->hi < y->hi);
}

void swemu_objects_init(void)
{
    struct stat st;
    uintptr_t bias = 0;
    const char *map;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    size_t n = 0, k;
    int fd;
    if (objs) return;
    if ((fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)) < 0) return;
    if (fstat(fd, &st) || (size_t)st.st_size < sizeof *eh) { close(fd); return; }
    /* mapped, not read: only the headers, .symtab and .strtab pages are touched; the names
     * stay in the mapping for the reports */
    map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    eh = (const Elf64_Ehdr *)map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof *sh || eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh > (size_t)st.st_size)
        return;
    sh = (const Elf64_Shdr *)(map + eh->e_shoff);
    dl_iterate_phdr(bias_cb, &bias);
    for (int pass = 0; pass < 2; pass++) {      /* count, then fill */
        for (int s = 0; s < eh->e_shnum; s++) {
            const Elf64_Sym *sym;
            const char *str;
            size_t count;
            if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum) continue;
            if (sh[s].sh_offset + sh[s].sh_size > (size_t)st.st_size) continue;
            sym = (const Elf64_Sym *)(map + sh[s].sh_offset);
            str = map + sh[sh[s].sh_link].sh_offset;
            count = sh[s].sh_size / sizeof *sym;
            for (size_t i = 0; i < count; i++) {
                const Elf64_Sym *y = &sym[i];
                if (ELF64_ST_TYPE(y->st_info) != STT_OBJECT || !y->st_size || y->st_shndx == SHN_UNDEF ||
                    y->st_shndx >= SHN_LORESERVE || (sh[y->st_shndx].sh_flags & SHF_TLS))
                    continue;
                if (pass) objs[n] = (swemu_obj){bias + y->st_value, bias + y->st_value + y->st_size, str + y->st_name};
                n++;
            }
        }
        if (!pass) {
            if (!n || !(objs = malloc(n * sizeof *objs))) return;
            n = 0;
        }
    }
    /* aliases and overlapping symbols become one object (their union): only bytes outside
     * every symbol covering the start count as past the end. Adjacent objects stay apart. */
    qsort(objs, n, sizeof *objs, by_lo);
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && objs[i].lo < objs[k - 1].hi) {
            if (objs[i].hi > objs[k - 1].hi) objs[k - 1].hi = objs[i].hi;
            continue;
        }
        objs[k++] = objs[i];
    }
    nobjs = swemu_objects = k;
}

/* The object holding address a, or NULL. */
static const swemu_obj *object_of(uintptr_t a)
{
    size_t lo = 0, hi = nobjs;
    while (lo < hi) {           /* first object with lo > a */
        size_t mid = (lo + hi) / 2;
        if (objs[mid].lo <= a) lo = mid + 1; else hi = mid;
    }
    return lo && a < objs[lo - 1].hi ? &objs[lo - 1] : NULL;
}

/* ---- heap blocks: a sorted array of live blocks in mmap'd memory (malloc must not recurse),
 * under a spinlock (malloc can run before and beside the CPE threads) ---- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

typedef struct { uintptr_t lo, hi; } swemu_blk_range;
static swemu_blk_range *heap;
static size_t nheap, heap_cap;
static int heap_lock;

static void lock(void) { while (__atomic_exchange_n(&heap_lock, 1, __ATOMIC_ACQUIRE)) sched_yield(); }
static void unlock(void) { __atomic_store_n(&heap_lock, 0, __ATOMIC_RELEASE); }

static size_t heap_index(uintptr_t a)     /* first block with lo > a */
{
    size_t lo = 0, hi = nheap;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (heap[mid].lo <= a) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static void *track(void *p, size_t n)
{
    size_t i;
    if (!p) return p;
    lock();
    if (nheap == heap_cap) {
        size_t cap = heap_cap ? 2 * heap_cap : 4096;
        void *q = mmap(NULL, cap * sizeof *heap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) { unlock(); return p; }    /* untracked: never a false report */
        if (heap) {
            memcpy(q, heap, nheap * sizeof *heap);
            munmap(heap, heap_cap * sizeof *heap);
        }
        heap = q;
        heap_cap = cap;
    }
    {
        /* live blocks never overlap: entries that do are stale (freed where no wrapper saw it) */
        uintptr_t lo = (uintptr_t)p, hi = lo + (n ? n : 1);
        size_t j;
        i = heap_index(lo);
        if (i && heap[i - 1].hi > lo) i--;
        for (j = i; j < nheap && heap[j].lo < hi; j++) {}
        memmove(&heap[i + 1], &heap[j], (nheap - j) * sizeof *heap);
        nheap = nheap - (j - i) + 1;
        heap[i] = (swemu_blk_range){lo, hi};
    }
    unlock();
    return p;
}

static void untrack(void *p)
{
    size_t i;
    if (!p) return;
    lock();
    i = heap_index((uintptr_t)p);
    if (i && heap[i - 1].lo == (uintptr_t)p) {
        memmove(&heap[i - 1], &heap[i], (nheap - i) * sizeof *heap);
        nheap--;
    }
    unlock();
}

void *malloc(size_t n) { return track(__libc_malloc(n), n); }
void *calloc(size_t k, size_t n) { return track(__libc_calloc(k, n), k * n); }
void free(void *p) { untrack(p); __libc_free(p); }
void *realloc(void *p, size_t n)
{
    void *q = __libc_realloc(p, n);
    if (q || !n) untrack(p);        /* on failure the old block stays */
    return n ? track(q, n) : q;
}
void *memalign(size_t a, size_t n) { return track(__libc_memalign(a, n), n); }
void *aligned_alloc(size_t a, size_t n) { return track(__libc_memalign(a, n), n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    void *p;
    if (a % sizeof(void *) || (a & (a - 1))) return EINVAL;
    if (!(p = track(__libc_memalign(a, n), n))) return ENOMEM;
    *out = p;
    return 0;
}

void swemu_check_object(swemu_cpe *c, const char *op, uintptr_t lo, uintptr_t hi)
{
    const swemu_obj *o = object_of(lo), *next;
    if (!o) {
        uintptr_t blo = 0, bhi = 0, nlo = 0;
        size_t i;
        lock();
        i = heap_index(lo);
        if (i && lo < heap[i - 1].hi) {
            blo = heap[i - 1].lo;
            bhi = heap[i - 1].hi;
            nlo = i < nheap && heap[i].lo < hi ? heap[i].lo : 0;
        }
        unlock();
        if (bhi && hi > bhi)
            swemu_die(c, "%s: main memory %#lx..%#lx runs %lu bytes past the end of the malloc block of %lu bytes "
                      "at %#lx%s", op, (unsigned long)lo, (unsigned long)hi, (unsigned long)(hi - bhi),
                      (unsigned long)(bhi - blo), (unsigned long)blo, nlo ? " into the next block" : "");
        return;
    }
    if (hi <= o->hi) return;
    next = o + 1 < objs + nobjs && o[1].lo < hi ? o + 1 : NULL;
    swemu_die(c, "%s: main memory %#lx..%#lx runs %lu bytes past the end of `%s` (%lu bytes at %#lx, "
              "the program's symbol table)%s%s%s", op, (unsigned long)lo, (unsigned long)hi,
              (unsigned long)(hi - o->hi), o->name, (unsigned long)(o->hi - o->lo), (unsigned long)o->lo,
              next ? " into `" : "", next ? next->name : "", next ? "`" : "");
}
