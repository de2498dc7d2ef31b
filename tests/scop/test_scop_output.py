"""Generated files: determinism, the host file keeps the user's code, API spellings, the
DMA helper's transfer counts, serial fallback end to end, CLI errors."""
import os
import subprocess
import sys
import textwrap

from scop_helpers import KERNELS_DIR, ROOT, check_results
from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.backends.sunway.emit import scop_printer
from swbuild.backends.sunway.emit.cpe_api import api_of
from swbuild.driver import scop as scop_cli

EMU = toolchain.load("sunway-emu")


def _gen(tmp_path, name, tc=EMU, defines=()):
    return scop_cli.generate(KERNELS_DIR / f"{name}.c", tc, tmp_path, [str(KERNELS_DIR)], list(defines))


def test_generation_is_deterministic_across_dirs_and_hash_seeds(tmp_path):
    outs = []
    for k, seed in enumerate(("1", "2")):
        out = tmp_path / f"o{k}" / ("deeper/" * k)
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-m", "swbuild.driver.scop", str(KERNELS_DIR / "syr2k.c"),
                        "--target", "sunway-emu", "-o", str(out), "-I", str(KERNELS_DIR), "-DSYMBOLIC"],
                       check=True, env=env, cwd=ROOT)
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outs[0] == outs[1]


def test_host_file_is_the_original_outside_regions(tmp_path):
    res = _gen(tmp_path, "jacobi-2d")
    src = (KERNELS_DIR / "jacobi-2d.c").read_text().split("\n")
    host = res["paths"]["host"].read_text().split("\n")
    r = res["plans"][0].region
    assert host[0] == '#include "jacobi-2d_scop.h"' and host[1] == '#line 1 "jacobi-2d.c"'
    assert host[2:2 + r.start_line - 1] == src[:r.start_line - 1]
    tail = host.index(f'#line {r.end_line + 1} "jacobi-2d.c"')
    assert host[tail + 1:] == src[r.end_line:]
    assert "athread_spawn(swk_jacobi_2d_r0_k0, &swk_a);" in "\n".join(host)


def test_api_spellings(tmp_path):
    v1 = _gen(tmp_path / "v1", "gemm")["paths"]["slave"].read_text()
    crts = _gen(tmp_path / "crts", "gemm", toolchain.load("sunway-pro-emu"))["paths"]["slave"].read_text()
    assert "athread_get(PE_MODE" in v1 and "SW_REPLY_WAIT(swk_rp2, swk_n);" in v1 and "CRTS_" not in v1
    assert "#define SW_REPLY_WAIT(r, n) while ((r) != (n))" in v1     # the chip's spelling of the wait
    assert "CRTS_dma_iget_stride(l, m, len, run, gap, rp)" in crts and "crts_rply_t" in crts
    assert "CRTS_dma_wait_value(&swk_rp2, swk_n);" in crts and "athread_get(" not in crts


def test_dma_helper_issues_one_strided_transfer_per_2d_box(tmp_path, runtime_libs):
    """swk_dma on a 4x5x6 array: boxes that are contiguous, one strided transfer, or one
    strided transfer per outer index; data round-trips exactly."""
    for tc in (EMU, toolchain.load("sunway-pro-emu")):
        api = api_of(tc)
        d = tmp_path / tc.name
        d.mkdir()
        (d / "t.h").write_text("struct targ { double *a, *b; int *n; };\n")
        (d / "slave.c").write_text(api.include + "\n" + api.wait_macro + '\n#include "t.h"\n' + scop_printer.dma_helper(api) + textwrap.dedent("""
            void kern(void *p) {
                struct targ *t = p;   /* direct main-memory reads of the argument: fine in a test */
                static const long E[3] = {0, 5, 6};
                long boxes[5][6] = {{0,0,0, 4,5,6}, {1,2,0, 2,3,6}, {1,2,3, 2,3,2},
                                    {0,4,5, 4,1,1}, {3,0,0, 1,5,6}};
                swk_reply_t rp;
                double *buf = ldm_malloc(120 * sizeof(double));
                if ((CRTS_ID) != 0) { ldm_free(buf, 120 * sizeof(double)); return; }
                for (int b = 0; b < 5; b++) {
                    int n = 0;
                    rp = 0;
                    n += swk_dma(0, (char *)t->a, (char *)buf, 8, 3, E, boxes[b], boxes[b] + 3, &rp);
                    WAIT;   /* the gets land before buf is put back (asynchronous DMA) */
                    n += swk_dma(1, (char *)(t->b + 120 * b), (char *)buf, 8, 3, E, boxes[b], boxes[b] + 3, &rp);
                    WAIT;
                    t->n[b] = n / 2;
                }
                ldm_free(buf, 120 * sizeof(double));
            }
            """).replace("CRTS_ID", api.tid).replace("WAIT", api.wait.format(r="rp", n="n") + ";"))
        (d / "host.c").write_text(textwrap.dedent("""
            #include <athread.h>
            #include <stdio.h>
            #include "t.h"
            extern void SLAVE_FUN(kern)(void *);
            int main(void) {
                static double a[120], b[600];
                static const int box[5][6] = {{0,0,0, 4,5,6}, {1,2,0, 2,3,6}, {1,2,3, 2,3,2},
                                              {0,4,5, 4,1,1}, {3,0,0, 1,5,6}};
                int n[5], bad = 0;
                struct targ t = {a, b, n};
                for (int i = 0; i < 120; i++) a[i] = i;
                for (int i = 0; i < 600; i++) b[i] = -1;
                athread_init();
                athread_spawn(kern, &t);
                athread_join();
                for (int x = 0; x < 5; x++)
                    for (int i = 0; i < 120; i++) {
                        int r = i / 30, c = i / 6 % 5, k = i % 6, in = 1;
                        int p[3] = {r, c, k};
                        for (int q = 0; q < 3; q++)
                            in &= p[q] >= box[x][q] && p[q] < box[x][q] + box[x][3 + q];
                        if (b[120 * x + i] != (in ? a[i] : -1)) bad++;
                    }
                printf("%d %d %d %d %d %d\\n", n[0], n[1], n[2], n[3], n[4], bad);
                athread_halt();
                return 0;
            }
            """))
        steps = []
        for tool, side, src in (("host_cc", "host", "host.c"), ("slave_cc", "slave", "slave.c")):
            steps.append(build.Step(src, tc.argv(tool) + build._cflags(tc, side, d) + ["-c", str(d / src), "-o", str(d / (src + ".o"))], [], [d / (src + ".o")]))
        lib = runtime_libs(tc)
        steps.append(build.Step("link", tc.argv("link") + [str(d / "host.c.o"), str(d / "slave.c.o"), str(lib)]
                                + list(tc.flags.get("libs", [])) + ["-o", str(d / "t")], [], [d / "t"]))
        build.run_steps(steps, log=lambda m: None)
        out = subprocess.run([str(d / "t")], capture_output=True, text=True, check=True).stdout.split()
        # whole array: 1; rows 2..4 of planes 1..2 (full rows): one strided; inner box: one
        # strided per plane; a column across planes: one strided; one full plane: contiguous
        assert out == ["1", "1", "2", "1", "1", "0"], (tc.name, out)


def test_serial_fallback_keeps_region_and_results(tmp_path, build_kernels):
    src = KERNELS_DIR / "features.c"
    bad = tmp_path / "mixed.c"
    text = src.read_text().replace("R[i] = R[i - 1] * 0.5 + Y[i][0];", "R[i] = R[i - 1] * 0.5 + Y[i][(i * i) % 7];")
    bad.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "swbuild.driver.scop", str(bad), "--target", "sunway-emu",
                           "-o", str(tmp_path / "o"), "-I", str(KERNELS_DIR)], capture_output=True, text=True, cwd=ROOT)
    line = text.split("\n").index(next(ln for ln in text.split("\n") if "(i * i) % 7" in ln)) + 1
    assert proc.returncode == 2
    assert f"mixed.c:{line}: array reference" in proc.stderr and "non-affine subscript" in proc.stderr
    # with --serial-fallback the whole region stays on the MPE and the program still works
    res = build_kernels("sunway-emu", [(bad, {})], serial_fallback=True)
    check_results(res)
    assert res[0].plans[0].serial and not res[0].stats.get("kernels")


def test_cli_exe_links_other_files_unchanged(tmp_path, runtime_libs):
    """FILE.c holds the region, OTHER.c the main program; --exe builds and links both."""
    (tmp_path / "kern.c").write_text(textwrap.dedent("""\
        #include <math.h>
        void scale(int n, double a, double x[n], double y[n])
        {
            int i;
        #pragma scop
            for (i = 0; i < n; i++)
                y[i] = a * sqrt(x[i]) + y[i];
        #pragma endscop
        }
        """))
    (tmp_path / "main.c").write_text(textwrap.dedent("""\
        #include <stdio.h>
        void scale(int n, double a, double x[n], double y[n]);
        int main(void)
        {
            static double x[1000], y[1000];
            double s = 0;
            for (int i = 0; i < 1000; i++) { x[i] = i; y[i] = 1; }
            scale(1000, 0.5, x, y);
            for (int i = 0; i < 1000; i++) s += y[i] * (i % 7 + 1);
            printf("%.15e\\n", s);
            return 0;
        }
        """))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "swbuild.driver.scop", str(tmp_path / "kern.c"),
                        str(tmp_path / "main.c"), "--target", "sunway-emu", "-o", str(out), "--exe", "prog"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    stats = tmp_path / "stats.json"
    run = subprocess.run([str(out / "prog")], capture_output=True, text=True, check=True,
                         env=dict(os.environ, SWEMU_STATS=str(stats)))
    expect = sum((0.5 * i ** 0.5 + 1) * (i % 7 + 1) for i in range(1000))
    assert abs(float(run.stdout) - expect) <= 1e-9 * expect
    import json
    (k,) = json.loads(stats.read_text())["kernels"]
    assert k["spawns"] == 1 and k["write_conflicts"] == 0 and k["dma"]["put"]["ops"] > 0
