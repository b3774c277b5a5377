"""vista-distill's cache folder (converted models, measured machine figures, server builds) and a lock on its
entries."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of vista-distill's cache (``$VISTA_DISTILL_CACHE``, else ``$XDG_CACHE_HOME/vista-distill``)."""
    env = os.environ.get("VISTA_DISTILL_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vista-distill"


@contextlib.contextmanager
def cache_lock(name: str):
    """Hold an exclusive lock on ``name`` in the cache while it is built, so two processes filling the same
    entry (two commands at once, or parallel test workers) build it once: the second waits, then finds it."""
    import fcntl

    from .exit_codes import writable_dir

    root = writable_dir(cache_dir(), "vista-distill cache folder", "VISTA_DISTILL_CACHE")
    with open(root / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
