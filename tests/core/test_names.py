import re

import subprocess

from swbuild.support.names import UniqueNames, c_comment, c_ident, c_prefix, c_string

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_identifiers_are_c_safe():
    for name in ["gpu_0/data_0", "9lives", "a b\nc", "*/ int x; /*", "", "for", "__reserved", "é€", "a" * 300]:
        s = c_ident(name)
        assert IDENT.match(s), (name, s)
        assert len(s) <= 48
        assert s not in {"for", "int"} and not s.startswith("__")


def test_prefix_examples():
    assert c_prefix("bert-base") == "bert_base"
    assert c_prefix("vgg16") == "vgg16"
    assert c_prefix("3d/net") == "_3d_net"


def test_unique_names_are_distinct_and_stable():
    u = UniqueNames(reserved={"ws"})
    a = u("in:x/y", "x/y")
    b = u("in:x_y", "x_y")
    c = u("out:ws", "ws")
    assert len({a, b, c}) == 3 and c != "ws"
    assert u("in:x/y", "x/y") == a


def test_comment_text_cannot_close_a_comment():
    s = c_comment("a */ b /* c \x00\n")
    assert "*/" not in s and "/*" not in s and "\n" not in s


def test_c_strings_hold_any_name_byte_for_byte(tmp_path):
    names = ['conv*/ "evil" \n#define x', "a\\b??=c%d", "é€\x00z", "gpu_0/data_0"]
    src = tmp_path / "s.c"
    src.write_text("#include <stdio.h>\nint main(void) {\n"
                   + "".join(f"    fwrite({c_string(n)}, 1, sizeof {c_string(n)} - 1, stdout); putchar(10);\n" for n in names)
                   + "    return 0;\n}\n")
    assert all("\n" not in c_string(n) and "??" not in c_string(n) for n in names)
    subprocess.run(["gcc", "-Wall", "-Werror", "-trigraphs", str(src), "-o", str(tmp_path / "s")], check=True)
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, check=True).stdout
    assert out == b"".join(n.encode() + b"\n" for n in names)


def test_keywords_macros_and_runtime_symbols_are_renamed():
    for name in ["NULL", "EOF", "assert", "errno", "asm", "typeof", "class", "new", "this", "template", "bool",
                 "operator", "true", "INFINITY", "M_PI", "memcpy", "athread_spawn", "CRTS_dma_get", "swemu_x",
                 "cnrtMalloc", "sw_ws"]:
        s = c_ident(name)
        assert s != name and IDENT.match(s), (name, s)
    assert c_ident("input_ids") == "input_ids"


def test_prefix_never_names_a_runtime_or_standard_header():
    for name in ["athread", "crts", "math", "stdio", "dma", "simd", "slave", "bang", "cnrt", "assert"]:
        p = c_prefix(name)
        assert p.lower() != name and IDENT.match(p), (name, p)


def test_unique_names_avoid_the_models_own_globals():
    u = UniqueNames(avoid_prefix="m_")
    assert u("in:m_weights", "m_weights") != "m_weights"


def test_kernel_name_pieces_keep_op_names():
    """A piece of a prefixed identifier is only sanitised: `abs`, `not` or `LRN` need no renaming
    there, and hostile text still cannot leave the identifier."""
    from swbuild.support.names import c_part
    assert [c_part(op).lower() for op in ("Abs", "Not", "LRN", "Conv")] == ["abs", "not", "lrn", "conv"]
    assert c_part("a*/b\n#x") == "a_b_x" and c_part("") == "t"
