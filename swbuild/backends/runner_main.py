"""The generated runner's main, shared by the target families: a program around a model's
public API that reads the inputs (raw little-endian files, or `.npy` with the dtype and shape
checked), runs the model `--warmup W` + `--repeat N` times, writes the outputs of the last run
(raw, or `.npy`), and with `--times` prints each run's time and each kernel's time per run
read from the chip's own clock:

- Sunway: the MPE cycle counter `rtc` (on the emulated targets athread.h's `rtc()`, the
  emulator's monotonic time at the chip's clock rate), cycles / clock_hz;
- DianNao/MLU: CNRT notifiers placed on the model's queue before each launch (on the emulated
  target they read the emulator's modelled device clock, bangemu/sched.h).

The per-kernel times come from the host's launch hook (watchdog.host_definition): called
before each launch and after the last, it stamps the clock. The printed lines are what
`swbuild run` parses (swbuild/driver/run_times.py: RUN_LINE, KERNEL_LINE).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..support.names import c_string
from . import watchdog


@dataclass
class Tensor:
    """One input or output as the runner handles it."""
    ctype: str          # C element type
    elems: str          # the header's element-count macro
    dtype: str          # numpy dtype name (the .npy descr)
    shape: tuple


def tensors(program, kind, prefix_upper, ctype_of):
    names = program.inputs if kind == "INPUT" else program.outputs
    g = program.graph
    return [Tensor(ctype_of[g.tensors[t].dtype], f"{prefix_upper}_{kind}{i}_ELEMS", g.tensors[t].dtype,
                   tuple(int(d) for d in g.tensors[t].shape)) for i, t in enumerate(names)]


def _descr(dtype):
    return np.dtype(dtype).newbyteorder("<").str if np.dtype(dtype).itemsize > 1 else np.dtype(dtype).str


_NPY = r'''
/* ---- files: raw little-endian, or NumPy .npy (version 1-3, C order, dtype and shape checked) ---- */
static int is_npy(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".npy") == 0;
}

static void fail(const char *path, const char *why)
{
    fprintf(stderr, "runner: %s: %s\n", path, why);
    exit(2);
}

static void npy_read_header(FILE *f, const char *path, const char *descr, const long *shape, int rank)
{
    unsigned char m[8], b[4];
    unsigned long hl;
    char *h, *p;
    int k = 0;
    if (fread(m, 1, 8, f) != 8 || memcmp(m, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file");
    if (m[6] == 1) {
        if (fread(b, 1, 2, f) != 2) fail(path, "truncated .npy header");
        hl = b[0] | (unsigned long)b[1] << 8;
    } else {
        if (fread(b, 1, 4, f) != 4) fail(path, "truncated .npy header");
        hl = b[0] | (unsigned long)b[1] << 8 | (unsigned long)b[2] << 16 | (unsigned long)b[3] << 24;
    }
    if (hl > 65536 || !(h = (char *)calloc(hl + 1, 1)) || fread(h, 1, hl, f) != hl) fail(path, "truncated .npy header");
    while (hl && (h[hl - 1] == ' ' || h[hl - 1] == '\n')) h[--hl] = 0;     /* the padding */
    p = strstr(h, "'descr':");
    if (!p || !(p = strchr(p + 8, '\'')) || strncmp(p + 1, descr, strlen(descr)) != 0 || p[1 + strlen(descr)] != '\'') {
        fprintf(stderr, "runner: %s: the model needs dtype '%s' (header %s)\n", path, descr, h);
        exit(2);
    }
    if (!strstr(h, "'fortran_order': False")) fail(path, "the array must be in C order");
    p = strstr(h, "'shape':");
    if (!p || !(p = strchr(p, '('))) fail(path, "no shape in the .npy header");
    for (p++; *p && *p != ')'; ) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        if (k >= rank || d != shape[k]) break;
        k++;
        p = end;
    }
    if (k != rank || *p != ')') {
        fprintf(stderr, "runner: %s: the model needs shape (", path);
        for (k = 0; k < rank; k++) fprintf(stderr, "%s%ld", k ? ", " : "", shape[k]);
        fprintf(stderr, ") (header %s)\n", h);
        exit(2);
    }
    free(h);
}

static void *load(const char *path, size_t n, size_t size, const char *descr, const long *shape, int rank)
{
    void *p = malloc(n * size + 8);
    FILE *f = fopen(path, "rb");
    if (!p || !f) fail(path, "cannot open");
    if (is_npy(path)) npy_read_header(f, path, descr, shape, rank);
    if (fread(p, size, n, f) != n) {
        fprintf(stderr, "runner: cannot read %zu elements from %s\n", n, path);
        exit(2);
    }
    fclose(f);
    return p;
}

static void save(const char *path, const void *p, size_t n, size_t size, const char *descr, const long *shape, int rank)
{
    FILE *f = fopen(path, "wb");
    if (f && is_npy(path)) {
        char h[1024];
        int k, len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
        for (k = 0; k < rank; k++) len += snprintf(h + len, sizeof h - len, "%ld,%s", shape[k], k + 1 < rank ? " " : "");
        if (rank > 1) len--;     /* (2, 3) but (5,) */
        len += snprintf(h + len, sizeof h - len, "), }");
        while ((10 + len + 1) % 64) h[len++] = ' ';
        h[len++] = '\n';
        fwrite("\x93NUMPY\x01\x00", 1, 8, f);
        fputc(len & 255, f);
        fputc(len >> 8, f);
        fwrite(h, 1, len, f);
    }
    if (!f || fwrite(p, size, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "runner: cannot write %s\n", path);
        exit(2);
    }
}

/* ---- timings: the launch hook stamps the clock; a kernel's time is the span to the next stamp ---- */
typedef struct { const char *name; STAMP_T at; } sw_mark_t;
typedef struct { const char *name; double seconds; long launches; } sw_ktime_t;
static sw_mark_t *marks;
static int nmarks, cap_marks;
static sw_ktime_t *ktimes;
static int nktimes;

static void on_launch(const char *kernel, void *queue)
{
    if (nmarks == cap_marks) {
        int old = cap_marks;
        cap_marks = cap_marks ? 2 * cap_marks : 64;
        marks = (sw_mark_t *)realloc(marks, cap_marks * sizeof *marks);
        if (!marks) { fprintf(stderr, "runner: out of memory\n"); exit(1); }
        STAMP_NEW(old, cap_marks);
    }
    marks[nmarks].name = kernel;
    STAMP(marks[nmarks].at, queue);
    nmarks++;
}

static void add_kernel(const char *name, double s)
{
    int i;
    for (i = 0; i < nktimes; i++)
        if (strcmp(ktimes[i].name, name) == 0) break;
    if (i == nktimes) {
        ktimes = (sw_ktime_t *)realloc(ktimes, (nktimes + 1) * sizeof *ktimes);
        if (!ktimes) { fprintf(stderr, "runner: out of memory\n"); exit(1); }
        ktimes[nktimes].name = name;
        ktimes[nktimes].seconds = 0;
        ktimes[nktimes].launches = 0;
        nktimes++;
    }
    ktimes[i].seconds += s;
    ktimes[i].launches++;
}

static long count(const char *opt, const char *text)
{
    char *end;
    long v = strtol(text ? text : "", &end, 10);
    if (!text || *end || end == text || v < 0) {
        fprintf(stderr, "runner: %s needs a whole number >= 0\n", opt);
        exit(2);
    }
    return v;
}
'''

_RTC = r'''/* The chip's clock: the MPE cycle counter. */
#if defined(SWEMU_API_V1) || defined(SWEMU_API_CRTS)
#include <athread.h>
static unsigned long sw_rtc(void) { return rtc(); }   /* the emulator's counter, athread.h */
#else
static unsigned long sw_rtc(void) { unsigned long t; __asm__ __volatile__("rtc %0" : "=r"(t)); return t; }
#endif
#define STAMP_T unsigned long
#define STAMP_NEW(from, to) ((void)(from), (void)(to))
#define STAMP(at, queue) ((void)(queue), (at) = sw_rtc())
#define SPAN(a, b) ((double)((b) - (a)) / CLOCK_HZ)
'''

_NOTIFIER = r'''/* The chip's clock: CNRT notifiers placed on the model's queue. */
static cnrtNotifier_t *notes;
#define STAMP_T int
#define STAMP_NEW(from, to) new_notes(from, to)
#define STAMP(at, queue) ((at) = nmarks, place(notes[nmarks], queue))
#define SPAN(a, b) span(a, b)
static void new_notes(int from, int to)
{
    notes = (cnrtNotifier_t *)realloc(notes, to * sizeof *notes);
    if (!notes) { fprintf(stderr, "runner: out of memory\n"); exit(1); }
    for (int i = from; i < to; i++)
        if (cnrtNotifierCreate(&notes[i]) != cnrtSuccess) { fprintf(stderr, "runner: cannot create a notifier\n"); exit(1); }
}
static void place(cnrtNotifier_t n, void *queue)
{
    if (cnrtPlaceNotifier(n, (cnrtQueue_t)queue) != cnrtSuccess) { fprintf(stderr, "runner: cannot place a notifier\n"); exit(1); }
}
static double span(int a, int b)
{
    float us = 0;
    if (cnrtNotifierDuration(notes[a], notes[b], &us) != cnrtSuccess) { fprintf(stderr, "runner: notifier timing failed\n"); exit(1); }
    return us * 1e-6;
}
'''


def runner_main(program, version, ins, outs, clock, clock_hz, run_args, setup):
    """The runner's source. ins/outs: Tensor lists; clock: "rtc" or "notifier"; run_args: the
    run() call's trailing arguments after the tensors (["ws"], ["NULL"]); setup: lines before
    init (the workspace). The text is C that C++ compiles too (the DianNao runner is .cpp).
    A kernel's time runs from the hook before its launch to the next hook (the next launch, or
    the run's end), so it includes filling the next launch's parameters: a few stores."""
    P = program.prefix
    nin, nout = len(ins), len(outs)
    usage = " ".join([f"IN{i}" for i in range(nin)] + [f"OUT{i}" for i in range(nout)])
    out = [f"/* Runner for {program.name.replace('*/', '* /')}: generated by swbuild {version}.",
           f" * usage: runner [--repeat N] [--warmup W] [--times] {usage}",
           " *   files: raw little-endian (the tensors' dtypes, C order), or .npy (dtype and shape checked);",
           " *   outputs are those of the last run; --times prints each run's and each kernel's time per run",
           f" *   from the chip's clock ({'the MPE cycle counter rtc' if clock == 'rtc' else 'CNRT notifiers'}). */",
           "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", f'#include "{P}.h"']
    if clock == "notifier":
        out.append("#include <cnrt.h>")
    out += ["", f"#define CLOCK_HZ {float(clock_hz)!r}"]
    out += (_RTC if clock == "rtc" else _NOTIFIER).splitlines()
    out += watchdog.runner_handler(P)
    out += ["#ifdef __cplusplus", 'extern "C" {', "#endif",
            f"extern void (*volatile {P}_launch_hook)(const char *kernel, void *queue);",
            "#ifdef __cplusplus", "}", "#endif"]
    out += _NPY.splitlines()
    out += ["", "int main(int argc, char **argv)", "{",
            f"    const char *files[{nin + nout + 1}];",
            "    long repeat = 1, warmup = 0, r;", "    int times = 0, nfiles = 0, i;"]
    for k, t in enumerate(ins + outs):
        dims = ", ".join(f"{d}L" for d in t.shape) or "0L"
        out.append(f"    static const long shape{k}[] = {{{dims}}};")
    out += ["    for (i = 1; i < argc; i++) {",
            '        if (strcmp(argv[i], "--repeat") == 0) { repeat = count("--repeat", argv[++i]); if (repeat < 1) repeat = 1; }',
            '        else if (strcmp(argv[i], "--warmup") == 0) warmup = count("--warmup", argv[++i]);',
            '        else if (strcmp(argv[i], "--times") == 0) times = 1;',
            f"        else if (nfiles < {nin + nout} && strncmp(argv[i], \"--\", 2) != 0) files[nfiles++] = argv[i];",
            "        else nfiles = -1000;", "    }",
            f"    if (nfiles != {nin + nout}) {{",
            f'        fprintf(stderr, "usage: %s [--repeat N] [--warmup W] [--times] {usage}\\n", argv[0]);',
            "        return 2;", "    }", "    signal(SIGTERM, on_term);"]
    for i, t in enumerate(ins):
        out.append(f"    {t.ctype} *in{i} = ({t.ctype} *)load(files[{i}], {t.elems}, sizeof({t.ctype}), "
                   f"{c_string(_descr(t.dtype))}, shape{i}, {len(t.shape)});")
    for i, t in enumerate(outs):
        out.append(f"    {t.ctype} *out{i} = ({t.ctype} *)calloc({t.elems} + 1, sizeof({t.ctype}));")
    out += setup
    call = ", ".join([f"in{i}" for i in range(nin)] + [f"out{i}" for i in range(nout)] + run_args)
    out += [f"    if ({P}_init() != 0) {{ fprintf(stderr, \"runner: init failed\\n\"); return 1; }}",
            f"    if (times) {P}_launch_hook = on_launch;",
            "    double total = 0, best = 0;",
            "    for (r = 0; r < warmup + repeat; r++) {",
            "        STAMP_T t0, t1;",
            "        nmarks = 0;",
            # Sunway: a stamp at the run's start; MLU: the first launch's notifier starts the device's time
            "        if (times) on_launch(\"\", NULL);" if clock == "rtc" else "        /* from the first launch */",
            f"        if ({P}_run({call}) != 0) {{ fprintf(stderr, \"runner: run failed\\n\"); return 1; }}",
            "        if (!times) continue;",
            "        if (nmarks < 2) { fprintf(stderr, \"runner: the model reported no launches to time\\n\"); return 1; }",
            "        t0 = marks[0].at; t1 = marks[nmarks - 1].at;",
            "        double s = SPAN(t0, t1);",
            "        printf(\"runner: run %ld/%ld%s: %.6f ms, %.0f cycles\\n\", r + 1, warmup + repeat, r < warmup ? \" (warm-up)\" : \"\", s * 1e3, s * CLOCK_HZ);",
            "        if (r < warmup) continue;",
            "        total += s;", "        if (r == warmup || s < best) best = s;",
            "        for (i = 0; i + 1 < nmarks; i++)",
            "            if (marks[i].name[0]) add_kernel(marks[i].name, SPAN(marks[i].at, marks[i + 1].at));",
            "    }",
            f"    {P}_launch_hook = 0;",
            f"    {P}_teardown();"]
    for i, t in enumerate(outs):
        out.append(f"    save(files[{nin + i}], out{i}, {t.elems}, sizeof({t.ctype}), {c_string(_descr(t.dtype))}, "
                   f"shape{nin + i}, {len(t.shape)});")
    out += ["    if (times) {",
            "        for (i = 0; i < nktimes; i++)",
            "            printf(\"runner: kernel %s: %.6f ms per run, %ld launches per run, %.0f cycles per run\\n\", ktimes[i].name,"
            " ktimes[i].seconds / repeat * 1e3, ktimes[i].launches / repeat, ktimes[i].seconds / repeat * CLOCK_HZ);",
            "        printf(\"runner: %ld runs after %ld warm-up: mean %.6f ms, min %.6f ms (clock %.6g Hz)\\n\", repeat, warmup,"
            " total / repeat * 1e3, best * 1e3, CLOCK_HZ);",
            "    }", "    return 0;", "}", ""]
    return "\n".join(out)
