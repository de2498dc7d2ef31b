"""Where swbuild's persistent caches live: `$ENV=off` turns one off, `$ENV=DIR` moves it,
else `$XDG_CACHE_HOME/swbuild/<name>` (~/.cache by default)."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(env: str, name: str):
    """The cache directory named by environment variable `env`, or None when it is off."""
    v = os.environ.get(env, "").strip()
    if v.lower() == "off":
        return None
    if v:
        return Path(v)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "swbuild" / name
