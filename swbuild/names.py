"""Model names → C identifiers that are safe, deterministic and unique.

Nothing from a model file reaches the generated C except through these functions (and
`c_comment`), so a hostile tensor name can never inject text into the output.
"""
import re

_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary""".split())


def c_ident(name: str, fallback: str = "t") -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name or "")
    s = re.sub(r"_+", "_", s).strip("_") or fallback
    if s[0].isdigit():
        s = "_" + s
    if s in _C_KEYWORDS or s.startswith("__"):
        s = "x_" + s
    return s[:48]


def c_prefix(model_name: str) -> str:
    """The prefix every symbol and file of a built model carries (`bert-base` → `bert_base`)."""
    return c_ident(model_name, "model")


class UniqueNames:
    """Hands out distinct identifiers in first-come order (deterministic for a fixed graph)."""

    def __init__(self, reserved=()):
        self._used = set(reserved)
        self._given = {}

    def __call__(self, key: str, hint: str = None) -> str:
        if key in self._given:
            return self._given[key]
        base = c_ident(hint if hint is not None else key)
        name, n = base, 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        self._given[key] = name
        return name


def c_comment(text: str) -> str:
    """Text safe inside /* */: printable ASCII without quotes or backslashes, no comment
    terminators (no model string ever puts a quote or a line break into the C text)."""
    s = "".join(ch if 32 <= ord(ch) < 127 and ch not in "\"'\\" else "?" for ch in str(text))
    return s.replace("*/", "* /").replace("/*", "/ *")[:120]


def c_string(text: str) -> str:
    """A C string literal holding `text` as UTF-8: printable ASCII as is, every other byte
    (and quote, backslash, '?' against trigraphs) as a three-digit octal escape."""
    out = []
    for b in str(text).encode("utf-8"):
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in "\"\\?" else f"\\{b:03o}")
    return '"' + "".join(out) + '"'
