"""`weights: file` (a recipe option): the weights stay in <prefix>_weights.bin, read at run
time, instead of being linked into the library and every program that links it.

The library then holds only a 64-byte-aligned .bss array of the blob's size (no bytes in
any object, archive or program); a program fills it from the file before <prefix>_init().
The generated runner does so from the path in $<PREFIX>_WEIGHTS, or <prefix>_weights.bin
next to itself. The public header says which mode a build uses (<PREFIX>_WEIGHTS_BYTES,
<PREFIX>_WEIGHTS_FILE), for an operator's own program. Family-neutral: it rewrites the
rendered weights assembler, runner and header the same way for Sunway and DianNao.
"""
from __future__ import annotations

from ..backends import family_of
from ..support.errors import UnsupportedError
from ..support.names import c_comment

MODES = ("embed", "file")


def apply(program, tc, files, options):
    """{file name: bytes} of a rendered build → the same files for `weights: file`."""
    if (options or {}).get("weights", "embed") != "file":
        return files
    P, U = program.prefix, program.prefix.upper()
    names = family_of(tc).generated_files(P)
    size = len(files[names["weights"]])
    if size == 0:
        return files        # nothing to load: the embedded one-byte stub stays
    runner, header = files[names["runner"]].decode(), files[names["header"]].decode()
    anchor_init, anchor_main, guard = f"{P}_init() != 0", "int main(int argc, char **argv)", f"#endif /* {U}_H */"
    for text, anchor, what in ((runner, anchor_init, "runner"), (runner, anchor_main, "runner"),
                               (header, guard, "header")):
        if text.count(anchor) != 1:
            raise UnsupportedError(f"weights: file: the generated {what} of {program.name} is not the shape this "
                                   f"option rewrites (no single `{anchor}`; MPI builds embed their weights)")
    cxx = names["runner"].endswith(".cpp")
    runner = runner.replace(anchor_main, "\n".join(_loader(P, U, names["weights"], size, cxx)) + "\n" + anchor_main)
    runner = runner.replace(anchor_init, f"{P}_load_weights(argv[0]) != 0 || {anchor_init}")
    header = header.replace(guard, "\n".join([
        f"/* weights: file. Before {P}_init(), read the {size} bytes of {names['weights']} into the array",
        f" * {P}_weights (declare it `extern unsigned char {P}_weights[];`). */",
        f"#define {U}_WEIGHTS_FILE \"{names['weights']}\"", f"#define {U}_WEIGHTS_BYTES {size}u", "", guard]))
    out = dict(files)
    out[names["runner"]], out[names["header"]] = runner.encode(), header.encode()
    out[names["weights_asm"]] = _bss_asm(program, P, size).encode()
    return out


def _bss_asm(program, P, size):
    return "\n".join([
        f"/* Weights of {c_comment(program.name)}: {size} bytes, read at run time from {P}_weights.bin (weights: file). */",
        "    .section .bss", "    .balign 64", f"    .globl {P}_weights", f"{P}_weights:", f"    .skip {size}",
        "    .balign 64", '    .section .note.GNU-stack,"",@progbits', ""])


def _loader(P, U, file_name, size, cxx):
    ext = 'extern "C" ' if cxx else "extern "
    return [
        f"{ext}unsigned char {P}_weights[];   /* .bss, filled here (weights: file) */",
        "",
        f"/* ${U}_WEIGHTS, or {file_name} in the runner's directory */",
        f"static int {P}_load_weights(const char *argv0)",
        "{",
        f"    static char buf[4096];",
        f"    const char *path = getenv(\"{U}_WEIGHTS\");",
        "    if (!path) {",
        "        const char *slash = strrchr(argv0, '/');",
        "        size_t dir = slash ? (size_t)(slash - argv0 + 1) : 0;",
        f"        if (dir + sizeof \"{file_name}\" > sizeof buf) {{ fprintf(stderr, \"runner: path too long\\n\"); return -1; }}",
        "        memcpy(buf, argv0, dir);",
        f"        memcpy(buf + dir, \"{file_name}\", sizeof \"{file_name}\");",
        "        path = buf;",
        "    }",
        "    FILE *f = fopen(path, \"rb\");",
        "    if (!f) { fprintf(stderr, \"runner: cannot open the weights file %s\\n\", path); return -1; }",
        f"    size_t got = fread({P}_weights, 1, {size}u, f);",
        "    int more = fgetc(f);",
        "    fclose(f);",
        f"    if (got != {size}u || more != EOF) {{",
        f"        fprintf(stderr, \"runner: %s: expected {size} bytes of weights, the file has %s\\n\", path, "
        "got < " f"{size}u ? \"fewer\" : \"more\");",
        "        return -1;",
        "    }",
        "    return 0;",
        "}",
        ""]
