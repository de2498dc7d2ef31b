"""Stand-in for `python -m swbuild.cli` in system tests of the SCons tool (SWCLI=...):
`compile` writes every file the emitter declares, deterministically, and logs each run
to <cwd>/gen.log; `check`/`report` run the runner, write --result and exit with its status."""
import argparse
import json
import os
import subprocess
import sys

from swbuild.driver.build import generated_files
from swbuild.support.names import c_prefix
from swbuild.config.recipe import load_recipe, parse_sets
from swbuild.config.toolchain import load

ap = argparse.ArgumentParser()
ap.add_argument("cmd", choices=["compile", "check", "report"])
ap.add_argument("--json", action="store_true")   # report: the document, not the table
ap.add_argument("--recipe", required=True)
ap.add_argument("--target", required=True)
ap.add_argument("--runner")
ap.add_argument("-o", dest="out", required=True)
ap.add_argument("--set", action="append", default=[])
ap.add_argument("--result")
a = ap.parse_args()
with open("gen.log", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\n")
if a.cmd != "compile":
    rc = subprocess.run([a.runner]).returncode
    print(f"fake{a.cmd}: {a.runner} exit {rc}")
    with open(a.result, "w") as fh:
        json.dump({"status": "pass" if rc == 0 else "fail"}, fh)
    sys.exit(rc)

r = load_recipe(a.recipe).with_overrides(parse_sets(a.set))
tc = load(a.target, os.getcwd())
P = c_prefix(r.name)
f = generated_files(P, tc.family)
os.makedirs(a.out, exist_ok=True)
text = {
    "host": f'#include "{P}.h"\n#include "{P}_para.h"\nint {P}_run(void) {{ return {P}_BATCH - {r.batch}; }}\n',
    "slave": f'#include "{P}_para.h"\nint {P}_slave_k(void) {{ return {P}_BATCH; }}\n',
    "para": f"#define {P}_BATCH {r.batch}\n",
    "header": f"int {P}_run(void);\n",
    "weights": "w" * r.batch,
    "weights_asm": f'.section .rodata\n.globl {P}_weights\n{P}_weights:\n.incbin "{f["weights"]}"\n',
    "runner": f'#include "{P}.h"\nint main(void) {{ return {P}_run(); }}\n',
    "plan": json.dumps(r.normalized(), sort_keys=True) + "\n",
    "lock": json.dumps({"target": a.target}) + "\n",
}
for role, name in f.items():
    with open(os.path.join(a.out, name), "w") as fh:
        fh.write(text[role])
print(f"fakecli: {P} -> {a.out}")
