"""Every benchmark the project reads, one home each: a module (a folder where it needs more than one) holding its
loader, its registry entry (``BENCHMARKS``), what ``vista-distill data fetch`` downloads for it (``FETCH``, with the
project's development subsets) and, where the project bundles a sample of it, ``build_sample``, which rebuilds the
files under ``data/samples/`` from the official ones (``python -m vista_distill.data.benchmarks build NAME``;
FaithDial's is ``faithdial/sample.py: build_samples``).

This module puts the registry together: :data:`BENCHMARKS` (name -> :class:`Benchmark`), :func:`load_benchmark`,
:func:`guess_benchmark` and :func:`fetch_sources`.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from types import ModuleType

from ..loading import LoadResult
from . import ais, begin, dialfact, factcheck_gpt, fade, faithdial, fhsumbench, finedialfact, vista_human
from .entry import Benchmark

MODULES: tuple[ModuleType, ...] = (faithdial, begin, fade, ais, dialfact, finedialfact, vista_human, factcheck_gpt,
                                   fhsumbench)
BENCHMARKS: dict[str, Benchmark] = {b.name: b for m in MODULES for b in m.BENCHMARKS}

__all__ = ["BENCHMARKS", "MODULES", "Benchmark", "fetch_sources", "guess_benchmark", "load_benchmark"]


def fetch_sources() -> dict:
    """What ``data fetch`` knows, by data-root folder: each module's ``FETCH``
    (:class:`..download.catalogue.Source`)."""
    return {m.FETCH.name: m.FETCH for m in MODULES if getattr(m, "FETCH", None) is not None}


def load_benchmark(name: str, source: str | os.PathLike, **options) -> LoadResult:
    """Load ``source`` with the named benchmark's loader; ``None`` options take the loader default."""
    try:
        bench = BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {sorted(BENCHMARKS)}") from None
    options = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(options) - set(bench.options()))
    if unknown:
        raise ValueError(f"benchmark {name!r} does not take option(s) {unknown}; it takes {bench.options()}")
    return bench.loader(source, **options)


def guess_benchmark(path: str | os.PathLike) -> str | None:
    """The benchmark a file most likely belongs to: from its path, then its name, then its first line."""
    p = Path(path)
    # Only the file and its two nearest folders: a clone in a folder named "vista-distill" (what
    # `git clone` makes) must not turn every file below it into the VISTA human set. Longest key first:
    # "finedialfact" before "dialfact", "data-audit" before "faithdial".
    s = "/".join(p.parts[-3:]).lower()
    keys = sorted(((k, b.name) for b in BENCHMARKS.values() for k in b.path_keys), key=lambda kb: -len(kb[0]))
    for key, name in keys:
        if key in s:
            return name
    for b in BENCHMARKS.values():
        if any(fnmatch.fnmatch(p.name.lower(), pat) for pat in b.file_patterns):
            return b.name
    try:
        with open(p, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    for b in BENCHMARKS.values():
        if any(k in first for k in b.first_line_keys):
            return b.name
    return None
