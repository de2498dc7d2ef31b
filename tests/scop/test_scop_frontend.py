"""Extraction: real system headers through gcc -E, regions, domains, accesses, errors."""
import textwrap

import pytest

from scop_helpers import KERNELS_DIR
from swbuild.config import toolchain
from swbuild.frontends import scop
from swbuild.frontends.scop import ScopError

TC = toolchain.load("sunway-emu")


def extract(tmp_path, body, head="", name="k.c", **kw):
    src = tmp_path / name
    src.write_text(textwrap.dedent(f"""\
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <stdint.h>
        #include <math.h>
        #define N 64
        static double A[N][N], B[N][N], x[N];
        static int idx[N];
        {head}
        void f(int n, double alpha)
        {{
            int i, j;
        #pragma scop
        {textwrap.indent(textwrap.dedent(body), '    ')}
        #pragma endscop
        }}
        """))
    return scop.extract(src, TC, **kw)


def test_system_headers_parse_and_lines_map_back(tmp_path):
    rs = extract(tmp_path, """\
        for (i = 0; i < n; i++)
            for (j = 0; j <= i; j++)
                A[i][j] = alpha * B[j][i] + sqrt(x[j]);
        """)
    assert len(rs) == 1
    r = rs[0]
    assert r.error is None
    lines = (tmp_path / "k.c").read_text().split("\n")
    start, end = lines.index("#pragma scop") + 1, lines.index("#pragma endscop") + 1
    assert (r.func, r.start_line, r.end_line) == ("f", start, end)
    s = r.stmts[0]
    assert s.line == start + 3 and s.iters == ["i", "j"]
    assert "i_j <= 1*i_i" in s.domain.replace("(", "").replace(")", "") or "i_j" in s.domain
    assert r.params == ["n"] and r.scalars == {"n": "int", "alpha": "double"}
    assert [(a.array, a.write, a.read) for a in s.refs] == [("A", True, False), ("B", False, True), ("x", False, True)]
    assert r.arrays["A"].const_dims == [64, 64] and r.arrays["A"].esize == 8


def test_typedefs_from_system_headers_are_kept_when_used(tmp_path):
    rs = extract(tmp_path, """\
        for (i = 0; i < N; i++)
            x[i] = (double)(uint32_t)i;
        """, head="static size_t unused_size; static FILE *log_file;")
    assert rs[0].error is None


def test_user_header_and_defines(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "sizes.h").write_text("#define M 17\n")
    src = tmp_path / "u.c"
    src.write_text('#include "sizes.h"\nstatic float Y[M][M];\nvoid g(void){ int i;\n#pragma scop\n'
                   "for (i = 0; i < M; i++) Y[i][i] = SCALE;\n#pragma endscop\n}\n")
    r = scop.extract(src, TC, includes=[str(tmp_path / "inc")], defines=["SCALE=2.0f"])[0]
    assert r.error is None and r.arrays["Y"].const_dims == [17, 17] and r.arrays["Y"].esize == 4
    assert "(17)" in r.stmts[0].domain


def test_every_listed_kernel_extracts():
    for name in ("gemm", "syrk", "jacobi-2d", "doitgen", "features"):
        for defines in ([], ["SYMBOLIC"]):
            rs = scop.extract(KERNELS_DIR / f"{name}.c", TC, [str(KERNELS_DIR)], defines)
            assert rs and all(r.error is None for r in rs), (name, defines, [r.error for r in rs])


@pytest.mark.parametrize("body,offset,construct", [
    ("for (i = 0; i < N; i++)\n    for (j = 0; j < N; j++)\n        B[i][j] = A[i * j % N][j];", 3,
     "array reference 'A[(i * j) % 64][j]'"),
    ("for (i = 0; i < N; i++)\n    for (j = 0; j < idx[i]; j++)\n        B[i][j] = 0;", 2, "loop bound 'idx[i]'"),
    ("for (i = 0; i < N; i++)\n    x[i] = rand();", 2, "call to 'rand'"),
    ("for (i = 0; i < N; i++)\n    *(x + i) = 1.0;", 2, "pointer arithmetic '*(x + i)'"),
    ("for (i = 0; i < N; i++)\n    if (x[i] > 0)\n        x[i] = 0;", 2, "condition 'x[i]'"),
    ("while (n > 0)\n    n--;", 1, "while loop 'while (n > 0)'"),
    ("for (i = 0; i < N; i++)\n    i = i + 1;", 2, "loop variable 'i'"),
    ("for (i = 0; i < N; i++) { x[i] = j; for (j = 0; j < N; j++) A[i][j] += 1; }", 1, "loop variable 'j'"),
    ("for (i = 0; i < n; i++)\n    n = 2;", 1, "loop bound 'n'"),
])
def test_outside_the_model_is_one_error_with_file_and_line(tmp_path, body, offset, construct):
    r = extract(tmp_path, body)[0]
    line = (tmp_path / "k.c").read_text().split("\n").index("#pragma scop") + 1 + offset
    assert isinstance(r.error, ScopError)
    msg = str(r.error)
    assert msg.startswith(f"{tmp_path / 'k.c'}:{line}: "), msg
    assert construct in msg, msg
    assert r.error.line == line


def test_unbalanced_pragmas(tmp_path):
    src = tmp_path / "p.c"
    src.write_text("void h(void) {\n#pragma scop\n}\n")
    with pytest.raises(ScopError, match=r"p.c:2: #pragma scop: no #pragma endscop"):
        scop.extract(src, TC)


def test_reduce_system_headers_keeps_only_needed_typedefs():
    text = ('# 1 "/usr/include/x.h" 1 3 4\ntypedef unsigned long size_t;\ntypedef int unused_t;\n'
            'typedef size_t my_size;\nextern int printf(const char *, ...);\n'
            'static inline int f(int a) { return a; }\n# 5 "k.c" 2\nmy_size v;\n')
    out = scop.reduce_system_headers(text)
    assert "typedef unsigned long size_t;" in out and "typedef size_t my_size;" in out
    assert "unused_t" not in out and "printf" not in out and "return a" not in out


def test_reduce_system_headers_keeps_tokens_system_macros_expand_to_in_user_code():
    # gcc -E marks `stderr` (a macro of stdio.h) in the user's line with flag 3
    text = ('# 1 "k.c"\n# 1 "/usr/include/stdio.h" 1 3 4\nextern FILE *stderr;\n# 2 "k.c" 2\n'
            'void f(void) { fprintf(\n# 3 "k.c" 3 4\n stderr\n# 3 "k.c"\n , "x"); }\n')
    out = scop.reduce_system_headers(text)
    assert "stderr\n" in out and "extern FILE" not in out
    scop.parse(out, "k.c")           # the reduced text alone parses
