"""Real C: a PolyBench-style program with glibc headers (realc/), parse errors with
pycparser's own position, and regions that must never be silently dropped or wrong:
out-of-bounds accesses, loop variables and scalars live outside their loops, scalar
recurrences, regions without parallel loops, and a 1-D loop too large for one tile per CPE."""
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from scop_helpers import check_results
from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.support.errors import SwbuildError
from swbuild.frontends import scop
from swbuild.driver import scop as scop_cli
from swbuild.frontends.scop import ScopError
from swbuild.optimizer.polyhedral import plan_region

TC = toolchain.load("sunway-emu")
REALC = Path(__file__).resolve().parent / "realc"
HEADERS = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n"


def write(tmp_path, text, name="k.c"):
    src = tmp_path / name
    src.write_text(HEADERS + textwrap.dedent(text))
    return src


def line_of(src, needle):
    return next(k for k, ln in enumerate(src.read_text().split("\n"), 1) if needle in ln)


def plans(src, **kw):
    quiet = dict(warn=lambda m: None)
    return [plan_region(r, TC, **kw, **quiet) for r in scop.extract(src, TC)]


def test_polybench_style_program_is_transformed_and_matches_serial(build_kernels):
    results = build_kernels("sunway-emu", [(REALC / "symm2mm.c", {"MINI_DATASET": None}),
                                           (REALC / "symm2mm.c", {"SMALL_DATASET": None})],
                            others=[REALC / "minibench.c"], includes=[REALC])
    check_results(results)
    for res in results:
        # symm with its scalar temporary, a matrix product, a VLA parameter, a region in main
        assert len(res.plans) == 4
        assert all(not p.serial and p.kernels for p in res.plans), [p.reason for p in res.plans]


def test_parse_error_keeps_pycparser_line_column_and_message(tmp_path):
    src = write(tmp_path, """\
        int f(int n)
        {
            int i = 0
            return i + n;
        }
        """)
    with pytest.raises(ScopError) as e:
        scop.extract(src, TC)
    line = line_of(src, "return i + n;")
    assert re.match(rf"{re.escape(str(src))}:{line}:\d+: C syntax pycparser cannot parse `return i \+ n;`: "
                    r"before: return", str(e.value)), str(e.value)


def test_statement_expressions_outside_regions_parse_inside_are_refused(tmp_path):
    src = write(tmp_path, """\
        static double A[16];
        #define TWICE(x) ({ double t_ = (x); t_ + t_; })
        void f(void)
        {
            int i;
            A[0] = TWICE(1.0);
        #pragma scop
            for (i = 0; i < 16; i++)
                A[i] = TWICE(A[i]);
        #pragma endscop
        }
        """)
    r = scop.extract(src, TC)[0]
    assert isinstance(r.error, ScopError)
    assert f"k.c:{line_of(src, 'A[i] = TWICE')}: statement expression" in str(r.error)


def test_out_of_bounds_constant_bound_is_an_error_with_the_line(tmp_path):
    src = write(tmp_path, """\
        #define N 100
        double A[N], B[N];
        void f(void)
        {
            int i;
        #pragma scop
            for (i = 0; i <= N; i++)
                A[i] = B[i] * 2;
        #pragma endscop
        }
        """)
    with pytest.raises(SwbuildError, match=rf"k.c:{line_of(src, 'A[i] = B[i]')}: array reference "
                       r"'A\[i\]': subscript 0 takes 0..100 but 'A' has extent 100"):
        plans(src)
    (p,) = plans(src, serial_fallback=True)
    assert p.serial and "out of bounds" in p.reason


def test_out_of_bounds_parameter_is_checked_at_run_time(tmp_path, runtime_libs):
    src = write(tmp_path, """\
        double A[100], B[100];
        static void k(int n)
        {
            int i;
        #pragma scop
            for (i = 0; i <= n; i++)
                A[i] = B[i] * 2 + 1;
        #pragma endscop
        }
        int main(int argc, char **argv)
        {
            int i;
            for (i = 0; i < 100; i++) B[i] = i;
            k(atoi(argv[1]));
            printf("%.6e %.6e\\n", A[5], A[99]);
            return 0;
        }
        """)
    out = tmp_path / "out"
    gen = scop_cli.generate(src, TC, out)
    assert gen["plans"][0].kernels
    steps, exe = scop_cli.exe_steps(TC, gen["paths"], [], out, "k", source_dir=tmp_path)
    steps = [s for s in steps if not s.label.startswith(("CC-EMU", "AR "))]
    steps[-1].argv = [str(runtime_libs(TC)) if str(a).endswith("libswemu.a") else a for a in steps[-1].argv]
    build.run_steps(steps, log=lambda m: None)
    ok = subprocess.run([str(exe), "99"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.split() == ["1.100000e+01", "1.990000e+02"]
    empty = subprocess.run([str(exe), "-1"], capture_output=True, text=True, timeout=60)
    assert empty.returncode == 0 and empty.stdout.split() == ["0.000000e+00", "0.000000e+00"]
    bad = subprocess.run([str(exe), "100"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
    assert f"k.c:{line_of(src, '#pragma scop')}: #pragma scop region accesses an array out of bounds" in bad.stderr


def test_loop_variables_and_scalars_live_after_the_region_are_refused(tmp_path):
    src = write(tmp_path, """\
        double A[64], B[64];
        int f(void)
        {
            int i;
            double t;
        #pragma scop
            for (i = 0; i < 64; i++)
                A[i] = B[i];
        #pragma endscop
            return i;
        }
        double g(void)
        {
            int i;
            double t;
        #pragma scop
            for (i = 0; i < 64; i++) {
                t = B[i] * 2;
                A[i] = t + 1;
            }
        #pragma endscop
            return t;
        }
        """)
    r0, r1 = scop.extract(src, TC)
    assert f"k.c:{line_of(src, 'return i;')}: loop variable 'i': read after the region" in str(r0.error)
    assert f"k.c:{line_of(src, 'return t;')}: scalar 't': read after the region" in str(r1.error)


def test_scalar_temporaries_and_recurrences(tmp_path):
    src = write(tmp_path, """\
        double A[64], B[64], S[1];
        void f(double s)
        {
            int i;
            double t;
        #pragma scop
            for (i = 0; i < 64; i++) {
                t = B[i] * 2;
                A[i] = t + 1;
            }
        #pragma endscop
        #pragma scop
            for (i = 0; i < 64; i++) {
                s = s + B[i];
                A[i] = s;
            }
        #pragma endscop
        }
        """)
    temp, rec = plans(src, serial_fallback=True)
    assert not temp.serial and temp.kernels           # t is private to each iteration
    assert rec.serial
    assert f"k.c:{line_of(src, 'A[i] = s;')}: scalar 's': a value it holds is read in a later iteration" \
        in rec.reason or f"k.c:{line_of(src, 's = s + B[i];')}: scalar 's'" in rec.reason, rec.reason


def test_region_without_parallel_loop_says_why(tmp_path):
    src = write(tmp_path, """\
        double A[64];
        void f(void)
        {
            int i;
        #pragma scop
            for (i = 1; i < 64; i++)
                A[i] = A[i - 1] + 1;
        #pragma endscop
        }
        """)
    (p,) = plans(src)
    assert not p.serial and not p.kernels
    assert p.reason.startswith(f"{src}:{line_of(src, '#pragma scop')}: no loop of the region can run in parallel")


def test_tiler_fits_a_loop_of_ten_million_doubles(tmp_path):
    src = write(tmp_path, """\
        #define N 10000000
        static double A[N];
        void f(void)
        {
            int i;
        #pragma scop
            for (i = 0; i < N; i++)
                A[i] = A[i] * 2;
        #pragma endscop
        }
        """)
    (p,) = plans(src)
    (kp,) = p.kernels
    assert kp.tiling.ldm_bytes <= TC.ldm_budget
    assert kp.tiling.sizes[0] * 8 <= TC.ldm_budget and kp.tiling.sizes[0] * 64 < 10_000_000


def test_many_glibc_headers_and_their_macros_outside_the_region(tmp_path):
    heads = ("assert errno float limits math stdbool stddef stdint stdio stdlib string time sys/time "
             "sys/types unistd pthread ctype signal stdarg inttypes").split()
    src = tmp_path / "h.c"
    src.write_text("".join(f"#include <{h}.h>\n" for h in heads) + textwrap.dedent("""\
        static double A[64][64];
        static double now(void) { struct timeval tv; gettimeofday(&tv, NULL); return tv.tv_sec + tv.tv_usec * 1e-6; }
        static void say(const char *fmt, ...) { va_list ap; va_start(ap, fmt); vfprintf(stderr, fmt, ap); va_end(ap); }
        int main(int argc, char **argv)
        {
            int i, j;
            bool ok = true;
            int64_t big = INT64_MAX;
            double t0 = now();
            assert(argc >= 1);
            if (errno == EINVAL || isdigit((unsigned char)argv[0][0])) ok = false;
        #pragma scop
            for (i = 0; i < 64; i++)
                for (j = 0; j < 64; j++)
                    A[i][j] = sqrt((double)(i + j)) + DBL_EPSILON;
        #pragma endscop
            say("%d %" PRId64 " %f\\n", ok, big, now() - t0);
            return 0;
        }
        """))
    (p,) = plans(src)
    assert not p.serial and p.kernels
    assert p.region.start_line == line_of(src, "#pragma scop")
