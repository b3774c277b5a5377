"""The data root: the one folder recipes name benchmark files relative to.

``--data-root DIR`` wins, then the environment variable ``VISTA_DISTILL_DATA``. Recipes never name
``../shared``: a source like ``begin/wow/begin_dev_wow.tsv`` is looked up under the root, so the same
recipe works wherever a user keeps the data (``vista-distill data fetch`` fills a root).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "VISTA_DISTILL_DATA"


def data_root(explicit: str | os.PathLike | None = None) -> Path | None:
    """The data root from ``explicit`` (``--data-root``) or ``$VISTA_DISTILL_DATA``; None when neither is set."""
    value = explicit if explicit not in (None, "") else os.environ.get(ENV)
    return Path(value).expanduser() if value else None


def resolve_source(source: str, root: Path | None) -> Path:
    """A recipe's ``source``: absolute paths and paths that exist as given stay; others go under the root."""
    p = Path(source).expanduser()
    if p.is_absolute() or root is None:
        return p
    under = root / p
    if under.exists() or not p.exists():
        return under
    return p


def missing_source_message(source: str, root: Path | None, recipe: str | None = None) -> str:
    """One line telling the user how to get a missing benchmark file."""
    where = f"{recipe}: " if recipe else ""
    if root is None:
        return (f"{where}data source {source!r} not found and no data root set: pass --data-root DIR or set "
                f"{ENV}=DIR (the folder holding the benchmarks; `vista-distill data fetch --list` says where each "
                f"comes from)")
    benchmark = Path(source).parts[0] if Path(source).parts else source
    return (f"{where}data source {source!r} not found under the data root {root} ({root / source}): "
            f"`vista-distill data fetch {benchmark} --to {root}` downloads it")
