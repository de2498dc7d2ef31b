"""Where swbuild's persistent caches live: `$ENV=off` turns one off, `$ENV=DIR` moves it,
else `$XDG_CACHE_HOME/swbuild/<name>` (~/.cache by default). A cache that is off unless asked
for (`default_on=False`) is on only with `$ENV=DIR` or `$ENV=on` (the default place)."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(env: str, name: str, default_on: bool = True):
    """The cache directory named by environment variable `env`, or None when it is off."""
    v = os.environ.get(env, "").strip()
    if v.lower() == "off" or (not v and not default_on):
        return None
    if v and v.lower() != "on":
        return Path(v)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "swbuild" / name
