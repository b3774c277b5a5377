"""Registry: benchmark name -> loader. Every loader returns a :class:`LoadResult` (conversations +
a report that accounts for every input row) and accepts ``split``, ``ambiguous`` and
``on_error``; other options are benchmark-specific (see each module's docstring)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .loading import LoadResult


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    function: str
    description: str

    @property
    def loader(self) -> Callable[..., LoadResult]:
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{self.module}"), self.function)

    def options(self) -> list[str]:
        params = inspect.signature(self.loader).parameters.values()
        return [p.name for p in params if p.kind == p.KEYWORD_ONLY]


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
    Benchmark("faithdial", "faithdial", "load_faithdial",
              "FaithDial corpus (Hub id McGill-NLP/FaithDial or a local copy) or data-audit CSVs"),
    Benchmark("faithdial-audit", "faithdial", "load_faithdial_audit", "FaithDial data-audit CSVs"),
    Benchmark("begin", "begin", "load_begin", "BEGIN TSV, 2022 (begin_label) or 2021 (5-way) release"),
    Benchmark("fade", "fade", "load_fade", "FADE CSV with BILOU hallucination tags"),
    Benchmark("ais", "ais", "load_ais", "AIS ann_wow.csv / ann_qrecc.csv joined to WoW / QReCC"),
    Benchmark("dialfact", "dialfact", "load_dialfact", "DialFact JSONL"),
    Benchmark("finedialfact", "finedialfact", "load_finedialfact", "FineDialFact JSON (claim level)"),
    Benchmark("vista-human", "vista_human", "load_vista_human", "VISTA authors' human re-annotation JSON"),
    Benchmark("factcheck-gpt", "factcheck_gpt", "load_factcheck_gpt",
              "Factcheck-GPT benchmark JSONL: question + ChatGPT answer with human atomic claims and evidence"),
    Benchmark("fhsumbench", "fhsumbench", "load_fhsumbench",
              "FHSumBench JSON: news summaries, faithful / factual / non-factual hallucination (measurement only)"),
)}


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
    """The benchmark a file most likely belongs to, from its path (then its first line)."""
    p = Path(path)
    # Only the file and its two nearest folders: a clone in a folder named "vista-distill" (what
    # `git clone` makes) must not turn every file below it into the VISTA human set.
    s = "/".join(p.parts[-3:]).lower()
    for key, name in (("fhsumbench", "fhsumbench"), ("factcheck_gpt", "factcheck-gpt"), ("factcheck-gpt", "factcheck-gpt"),
                      ("finedialfact", "finedialfact"), ("dialfact", "dialfact"), ("vista_human", "vista-human"),
                      ("vista-human", "vista-human"),
                      ("data-audit", "faithdial-audit"), ("faithdial", "faithdial"), ("begin", "begin"),
                      ("fade", "fade")):
        if key in s:
            return name
    if p.name.lower().startswith("vista"):
        return "vista-human"
    if p.name.startswith("ann_") and p.suffix == ".csv":
        return "ais"
    try:
        with open(p, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    if "begin_label" in first or "gold label" in first:
        return "begin"
    if "hallucination_tags" in first:
        return "fade"
    if "ex-idx" in first:
        return "ais"
    if "response_label" in first:
        return "dialfact"
    if "response_factuality" in first:
        return "factcheck-gpt"
    return None
