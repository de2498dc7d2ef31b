"""The whole translation unit through the target's preprocessor and pycparser.

System headers are reduced to the typedefs the user's code names (libc's thousands of
prototypes would cost most of the 0.3 s generation budget and carry GNU syntax); if the
reduced text does not parse, the full text is parsed, and an error keeps pycparser's own
file, line, column and message plus the source line it points at.
"""
from __future__ import annotations

import re
import subprocess

import pycparser
from pycparser import c_parser

from ...support.errors import ToolchainError
from .model import ScopError

# gcc -E keeps GNU syntax that pycparser cannot read; these turn it into plain C99.
GNU_DEFINES = ["__attribute__(x)=", "__extension__=", "__restrict=", "__restrict__=",
               "__asm__(x)=", "__asm(x)=", "__inline=inline", "__inline__=inline",
               "__volatile__=volatile", "__const=const", "__signed__=signed",
               "_Noreturn=", "__thread="]
# gcc builtin type names that glibc headers use in typedefs.
_PRELUDE = "typedef int __builtin_va_list;" + "".join(f"typedef {t} {n};" for t, n in [
    ("double", "_Float128"), ("double", "_Float64"), ("float", "_Float32"),
    ("double", "_Float64x"), ("double", "_Float32x"), ("float", "_Float16")]) + "\n"


# ---------------------------------------------------------------------- preprocess

def preprocess(path, tc=None, includes=(), defines=()):
    """The file through the target's C preprocessor (gcc -E for emulated targets)."""
    argv = (tc.argv("host_cc") if tc is not None else ["gcc"]) + ["-E"]
    argv += [f"-D{d}" for d in GNU_DEFINES]
    argv += [f"-I{i}" for i in includes] + [f"-D{d}" for d in defines] + [str(path)]
    try:
        p = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise ToolchainError(f"preprocessor '{argv[0]}' not found") from None
    if p.returncode != 0:
        raise ToolchainError(f"preprocessing {path} failed:\n{p.stderr.strip()}")
    return p.stdout


_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PUNCT = re.compile(r"[;{}()\[\]]")
_KEYWORDS = frozenset("""typedef struct union enum const volatile unsigned signed int long short char
    float double void extern static inline restrict _Bool""".split())


def reduce_system_headers(text):
    """Drop what system headers contribute except the typedefs the user's code needs.

    pycparser only needs typedef names to parse the user's code; libc's thousands of
    prototypes cost most of the parse time (the budget is 0.3 s per kernel) and carry GNU
    syntax. Line markers stay, so coordinates still name the original file and line.
    """
    out, sysparts, in_sys, system_files = [], [], False, set()
    for line in text.split("\n"):
        if line.startswith("#"):
            m = _MARKER.match(line)
            if m:
                flags = m.group(3).split()
                # a file entered with flag 3 is a system header; flag 3 on the user's own
                # file marks a token that a system macro expanded to (`stderr`): keep it
                if "1" in flags and "3" in flags:
                    system_files.add(m.group(2))
                in_sys = "3" in flags and m.group(2) in system_files
                if in_sys:
                    continue
            elif in_sys:
                continue
            out.append(line)
        elif in_sys:
            sysparts.append(line)
        else:
            out.append(line)
    chunks = _typedef_chunks("\n".join(sysparts))
    # keep the typedefs the user's code names, and those they are built from
    need = set(_IDENT.findall("\n".join(l for l in out if not l.startswith("#"))))
    keep = []
    for name, chunk in reversed(chunks):
        if name is None or name in need:
            keep.append(chunk)
            need.update(_IDENT.findall(chunk))
    keep.reverse()
    # the typedefs go first, before the first line marker of the main file
    return "\n".join(keep + out)


def _typedef_chunks(text):
    """Top-level `typedef ...;` declarations of system-header text as (name, one-line text)."""
    chunks, depth, start = [], 0, 0
    for m in _PUNCT.finditer(text):
        c, i = m.group(), m.start()
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            # end of a function body at file scope: `... ) { ... }` has no `;`
            if c == "}" and depth == 0 and not re.match(r"\s*(typedef|struct|union|enum)\b", text[start:i]):
                start = i + 1
        elif depth == 0:                                   # ';' at file scope
            chunk = text[start:i + 1].strip()
            if chunk.startswith("typedef") and "typeof" not in chunk:
                chunks.append((_typedef_name(chunk), " ".join(chunk.split())))
            start = i + 1
    return chunks


def _typedef_name(chunk):
    m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", chunk)     # function pointer
    if m:
        return m.group(1)
    body = re.sub(r"\[[^\]]*\]", "", re.sub(r"\{.*\}", "{}", chunk, flags=re.S))
    names = [n for n in _IDENT.findall(body) if n not in _KEYWORDS]
    return names[-1] if names and "," not in body else None


STMT_EXPR = "__statement_expression__"
_STMT_EXPR_OPEN = re.compile(r"\(\s*\{")


def hide_statement_expressions(text):
    """GNU statement expressions `({ ... })` (pycparser cannot read them) become a call
    STMT_EXPR() with the same line breaks: the host file keeps the original text, and the
    builder refuses such a call inside a region."""
    if "({" not in text and not _STMT_EXPR_OPEN.search(text):
        return text
    out, pos = [], 0
    for m in _STMT_EXPR_OPEN.finditer(text):
        start = m.start()
        if start < pos:
            continue
        line_start = text.rfind("\n", 0, start) + 1
        if text.count('"', line_start, start) % 2 or text[line_start:line_start + 1] == "#":
            continue                                  # inside a string literal or a directive
        depth, k = 0, m.end() - 1
        while k < len(text):
            ch = text[k]
            if ch == '"' or ch == "'":
                k = _skip_literal(text, k)
                continue
            depth += ch == "{"
            depth -= ch == "}"
            k += 1
            if depth == 0:
                break
        close = re.compile(r"\s*\)").match(text, k)
        if depth or not close:
            continue
        end = close.end()
        out += [text[pos:start], f"({STMT_EXPR}()", "\n" * text.count("\n", start, end), ")"]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _skip_literal(text, k):
    q, k = text[k], k + 1
    while k < len(text) and text[k] != q:
        k += 2 if text[k] == "\\" else 1
    return k + 1


class _Parser(c_parser.CParser):
    """pycparser, with the position of the next token when an error carries none."""

    def _parse_error(self, msg, coord):
        if not isinstance(coord, c_parser.Coord):
            tok = self._peek()
            coord = self._tok_coord(tok) if tok is not None else f"{self.clex.filename}:end of input"
        super()._parse_error(msg, coord)


def parse(text, path, full=None):
    """The AST of `text`; `full` is the unreduced text, tried when `text` fails.
    A ParseError becomes a ScopError with pycparser's file, line, column and message."""
    try:
        return _Parser().parse(_PRELUDE + hide_statement_expressions(text), str(path))
    except pycparser.c_parser.ParseError as e:
        err = e
    if full is not None and full is not text:
        try:
            return _Parser().parse(_PRELUDE + hide_statement_expressions(full), str(path))
        except pycparser.c_parser.ParseError as e:
            err = e
    file, line, col, msg = _split_coord(str(err), path)
    where = f"{line}:{col}" if col else str(line)
    src = _source_line(file, line)
    raise ScopError(file, where, "C syntax pycparser cannot parse" + (f" `{src}`" if src else ""),
                    f"{msg} (pycparser reads C99 plus __attribute__/__asm__/__extension__, "
                    "which the preprocessor hides; other GNU extensions are not supported)") from None


def _split_coord(msg, path):
    m = re.match(r"(.*?):(\d+)(?::(\d+))?:\s*(.*)", msg, re.S)
    if m:
        return m.group(1), int(m.group(2)), int(m.group(3) or 0), m.group(4)
    m = re.match(r"(.*?):\s*(.*)", msg, re.S)
    return (m.group(1), 0, 0, m.group(2)) if m else (str(path), 0, 0, msg)


def _source_line(file, line):
    try:
        with open(file, errors="replace") as f:
            for k, text in enumerate(f, 1):
                if k == line:
                    return " ".join(text.split())[:80]
    except OSError:
        pass
    return ""
