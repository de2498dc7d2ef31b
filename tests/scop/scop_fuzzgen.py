"""Seeded random affine loop nests for the SCoP differential fuzzer.

`program(seed, cases)` writes one C file with `cases` functions, each holding one
`#pragma scop` region over its own global arrays, and a main that initialises the arrays,
runs each case and prints one checksum per array. The nests use what real kernels use:
forward, reversed and stepped loops, triangular bounds, affine conditionals, scalar
temporaries, reductions into arrays and scalars, loop variables reused by sibling nests,
symbolic bounds passed as arguments; some cases carry a known defect (an off-by-one bound
that leaves an array, a loop variable read after the region) and must be refused.

The same file is compiled serially by gcc and through `swbuild scop`; every region is
either transformed and prints what the serial program prints, or refused with file:line.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

ITERS = "ijk"


@dataclass
class Case:
    index: int
    arrays: dict = field(default_factory=dict)    # name -> [extents]
    lines: list = field(default_factory=list)     # region body
    defect: str = ""                               # "oob" / "live-out": must be refused
    params: dict = field(default_factory=dict)     # argument name -> value passed
    ret: str = "0"


class _Gen:
    def __init__(self, rnd, case):
        self.r, self.c = rnd, case
        self.scalars_used = False

    def arr(self, name, dims):
        self.c.arrays[name] = dims
        return name

    # -- subscripts: affine in the iterators in scope, inside the extent
    def sub(self, ext, scope, oob=False, taken=None):
        r = self.r
        cands = [v for v in scope if scope[v][1] - scope[v][0] < ext]
        if taken is not None:          # a write: distinct iterators where possible
            cands = [v for v in cands if v not in taken] or cands
        if cands and r.random() < (0.97 if taken is not None else 0.85):
            v = r.choice(cands)
            if taken is not None:
                taken.add(v)
            lo, hi = scope[v]
            if r.random() < 0.2 and hi - lo + 1 <= ext:       # reversed index
                top = r.randint(hi, ext - 1)
                return f"{top} - {v}" if top else f"-{v}"
            c = r.randint(-lo, ext - 1 - hi)
            if oob:
                c = ext - hi                                 # one past the end
            return v if c == 0 else (f"{v} + {c}" if c > 0 else f"{v} - {-c}")
        return str(r.randint(0, ext - 1))

    def ref(self, name, scope, oob=False, write=False):
        dims = self.c.arrays[name]
        taken = set() if write else None
        subs = [self.sub(e, scope, oob and q == len(dims) - 1, taken) for q, e in enumerate(dims)]
        return name + "".join(f"[{s}]" for s in subs)

    def expr(self, scope, temps, depth=0):
        r = self.r
        k = r.random()
        if k < 0.45 or depth > 1:
            return self.ref(r.choice(sorted(self.c.arrays)), scope)
        if k < 0.55 and scope:
            return f"(double)({r.choice(sorted(scope))} + 1)"
        if k < 0.62 and temps:
            return r.choice(temps)
        if k < 0.68:
            return f"sqrt(fabs({self.expr(scope, temps, depth + 1)}))"
        if k < 0.74:
            return f"{r.choice(['0.5', '1.25', '2.0', '0.75'])}"
        op = r.choice(["+", "-", "*", "+"])
        return f"({self.expr(scope, temps, depth + 1)} {op} {self.expr(scope, temps, depth + 1)})"

    # -- loops
    def loop(self, v, lo, hi, scope, sym=None):
        """for-loop header over [lo, hi] (constant ends; `sym` names an argument for hi+1)."""
        r = self.r
        k = r.random()
        up = sym or str(hi + 1)
        if k < 0.2:
            return f"for ({v} = {hi}; {v} >= {lo}; {v}--)", (lo, hi)
        if k < 0.32:
            return f"for ({v} = {lo}; {v} < {up}; {v} += 2)", (lo, hi)
        if k < 0.5 and scope:                           # triangular: from an outer iterator
            o = r.choice(sorted(scope))
            olo, ohi = scope[o]
            if olo >= lo and ohi <= hi:
                return f"for ({v} = {o}; {v} < {up}; {v}++)", (lo, hi)
        if k < 0.6 and scope:
            o = r.choice(sorted(scope))
            olo, ohi = scope[o]
            if olo >= lo and ohi <= hi:
                return f"for ({v} = {lo}; {v} <= {o}; {v}++)", (lo, hi)
        return f"for ({v} = {lo}; {v} < {up}; {v}++)", (lo, hi)

    def nest(self, depth, ind, scope, temps, oob):
        r = self.r
        out = []
        if depth == 0:
            return self.body(ind, scope, temps, oob)
        v = ITERS[len(scope)]
        ext = r.randint(5, 19)
        sym = None
        if not scope and r.random() < 0.25:
            sym = f"n{len(self.c.params)}"
            self.c.params[sym] = ext
        if oob:                      # off by one in the bound: no condition hides it
            out.append(f"{ind}for ({v} = 0; {v} <= {ext}; {v}++)")
            inner = dict(scope, **{v: (0, ext)})
            a = self.c.arrays and sorted(self.c.arrays)[0]
            out.append(f"{ind}  {a}{''.join('[0]' for _ in self.c.arrays[a][:-1])}[{v}] = 1.0;")
            self.c.arrays[a][-1] = ext           # the array is exactly ext long: index ext is out
            return out
        head, rng = self.loop(v, 0, ext - 1, scope, sym)
        inner = dict(scope, **{v: rng})
        out.append(f"{ind}{head} {{")
        if depth == 1 and r.random() < 0.25:           # a reduction into a scalar
            t = "s"
            init = self.ref(r.choice(sorted(self.c.arrays)), scope) if scope else "0.0"
            out[-1:] = [f"{ind}s = {init};", out[-1]]
            out.append(f"{ind}  s += {self.expr(inner, [])};")
            out.append(f"{ind}}}")
            out.append(f"{ind}{self.ref(self.target(), scope, write=True)} = s;")
            self.scalars_used = True
            return out
        if r.random() < 0.25:
            out.append(f"{ind}  if ({v} > {r.randint(0, ext - 1)}) {{")
            out += self.nest(depth - 1, ind + "    ", inner, temps, False)
            out.append(f"{ind}  }}")
        else:
            out += self.nest(depth - 1, ind + "  ", inner, temps, False)
        out.append(f"{ind}}}")
        return out

    def target(self):
        return self.r.choice(sorted(self.c.arrays))

    def body(self, ind, scope, temps, oob):
        r = self.r
        out = []
        temps = list(temps)
        if r.random() < 0.2:                           # a scalar temporary
            out.append(f"{ind}t = {self.expr(scope, temps)};")
            temps.append("t")
            self.scalars_used = True
        for _ in range(r.randint(1, 2)):
            op = r.choice(["=", "=", "+=", "-=", "*="])
            out.append(f"{ind}{self.ref(self.target(), scope, write=True)} {op} {self.expr(scope, temps)};")
        return out


def make_case(rnd, index):
    c = Case(index)
    g = _Gen(rnd, c)
    for a in range(rnd.randint(2, 3)):
        nd = rnd.randint(1, 2)
        g.arr(f"c{index}_{'ABC'[a]}", [rnd.randint(12, 24) for _ in range(nd)])
    k = rnd.random()
    if k < 0.07:
        c.defect = "oob"
    elif k < 0.12:
        c.defect = "live-out"
    lines = []
    for n in range(rnd.randint(1, 3)):
        lines += g.nest(rnd.randint(1, 3), "  ", {}, [], c.defect == "oob" and n == 0)
    if c.defect == "live-out":
        c.ret = "i"
    c.lines = lines
    return c


def program(seed, cases):
    """(C text, [Case]) of one fuzz program."""
    rnd = random.Random(seed)
    cs = [make_case(rnd, k) for k in range(cases)]
    out = [f"/* swbuild scop fuzz program, seed {seed} */", "#include <stdio.h>", "#include <math.h>", ""]
    for c in cs:
        for name, dims in sorted(c.arrays.items()):
            out.append(f"static double {name}{''.join(f'[{d}]' for d in dims)};")
    out.append("")
    for c in cs:
        args = ", ".join(f"int {p}" for p in c.params) or "void"
        out += [f"static int case{c.index}({args})", "{", "  int i = 0, j = 0, k = 0;", "  double t, s;",
                "  (void)t; (void)s; (void)j; (void)k;", "#pragma scop"] + c.lines + \
            ["#pragma endscop", f"  return {c.ret};", "}", ""]
    out += ["static void fill(double *a, int n, int salt)", "{", "  int q;",
            "  for (q = 0; q < n; q++) a[q] = (double)((q * 7 + salt * 3) % 13) / 4.0 - 1.0;", "}", "",
            "static void sum(const char *name, const double *a, int n)", "{", "  double s = 0.0;", "  int q;",
            "  for (q = 0; q < n; q++) s += (q % 17 + 1) * a[q];",
            '  printf("%s %.12e\\n", name, s);', "}", "", "int main(void)", "{"]
    for c in cs:
        for salt, (name, dims) in enumerate(sorted(c.arrays.items())):
            n = "*".join(map(str, dims))
            out.append(f"  fill(&{name}{'[0]' * len(dims)}, {n}, {salt + c.index});")
        args = ", ".join(str(v) for v in c.params.values())
        out.append(f'  printf("case{c.index} %d\\n", case{c.index}({args}));')
        for name, dims in sorted(c.arrays.items()):
            n = "*".join(map(str, dims))
            out.append(f'  sum("{name}", &{name}{"[0]" * len(dims)}, {n});')
    out += ["  return 0;", "}", ""]
    return "\n".join(out), cs
