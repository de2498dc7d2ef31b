"""Recipe text → (data, {dotted field: line}): YAML (safe loader) and TOML, with the line
of every key, so each recipe error can name `file:line: field`."""
from __future__ import annotations

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from ..support.errors import RecipeError


def parse_yaml(path, text):
    import yaml         # here: a build from an ONNX file or a TOML recipe does not need it (15 ms)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise RecipeError(path, mark.line + 1 if mark else 0, None,
                          f"YAML syntax error: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise RecipeError(path, 0, None, f"YAML error: {e}") from None
    finally:
        loader.dispose()
    lines = {}

    def walk(n, prefix):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = f"{prefix}.{k.value}" if prefix else str(k.value)
                if key in lines:
                    raise RecipeError(path, k.start_mark.line + 1, key, "duplicate key")
                lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                lines[f"{prefix}[{i}]"] = v.start_mark.line + 1
                walk(v, f"{prefix}[{i}]")
    if node is not None:
        walk(node, "")
    return data, lines


_KEY = r'(?:[A-Za-z0-9_\-]+|"[^"]*")'


def parse_toml(path, text):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        line = int(m.group(1)) if m else len(text.splitlines()) if "end of document" in str(e) else 0
        raise RecipeError(path, line, None, f"TOML syntax error: {e}") from None
    # tomllib keeps no positions: a light scan of headers and `key =` lines is enough
    # to point at the line a user must fix.
    lines, prefix, counts = {}, "", {}
    for no, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if m := re.match(rf"\[\[\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]\]", s):
            name = _dotted(m.group(1))
            idx = counts[name] = counts.get(name, -1) + 1
            prefix = f"{name}[{idx}]"
            lines.setdefault(name, no)
            lines[prefix] = no
        elif m := re.match(rf"\[\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]", s):
            prefix = _dotted(m.group(1))
            lines.setdefault(prefix, no)
        elif m := re.match(rf"({_KEY}(?:\s*\.\s*{_KEY})*)\s*=(.*)", s):
            key = f"{prefix}.{_dotted(m.group(1))}" if prefix else _dotted(m.group(1))
            lines.setdefault(key, no)
            rest = m.group(2)
            if rest.lstrip().startswith("{"):      # inline table: its keys are on this line
                for sub in re.findall(rf"[{{,]\s*({_KEY})\s*=", rest):
                    lines.setdefault(f"{key}.{_dotted(sub)}", no)
    return data, lines


def _dotted(key):
    return ".".join(p.strip().strip('"') for p in key.split("."))
