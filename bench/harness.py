"""What the protocol scripts share (bench/demo_protocol.py, bench/world_protocol.py):
the machine a result came from, where results are saved, a run's recipe, and the choice on validation.

The protocol each follows: variants judged on a validation split carved from the training sources, the choice
made by a criterion fixed before any variant ran (:func:`choose`), the choice trained with several seeds, the test
touched once per seed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict[str, Any]:
    """The CPU (by kind), the load average at the start, torch's threads and the time."""
    import torch

    from vista_distill.runtime.hardware import detect

    return {"cpu": detect("cpu").describe(), "loadavg_start": os.getloadavg()[0],
            "torch_threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d %H:%M")}


def commit() -> str:
    """The checkout's short commit (results name the code they came from)."""
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def result_name(m: dict[str, Any], tag: str = "") -> str:
    """``<cpu>[_<tag>]``: a result file's name from :func:`machine`'s CPU, so a rerun on the same kind overwrites it
    (the date is inside the file)."""
    import re

    # "CPU AMD EPYC (torch: AVX512-BF16; native bf16)" -> amd-epyc-avx512-bf16
    name = re.sub(r"\((r|tm)\)|\bprocessor\b", " ", m["cpu"].split(",")[0].split(";")[0].lower())
    words = re.findall(r"[a-z0-9]+", name)
    cpu = "-".join(w for w in dict.fromkeys(words) if w not in ("cpu", "torch", "native"))
    return f"{cpu}_{tag}" if tag else cpu


def header(m: dict[str, Any], what: str) -> str:
    """The line under a result file's title: when, which code, which CPU, its load, and what ran."""
    return (f"{m['date']}, commit {commit()}, {m['cpu']}, {m['torch_threads']} torch threads, load "
            f"{m['loadavg_start']:.2f} at the start; {what}")


def save(out: Path, name: str, data: dict[str, Any]) -> Path:
    """``out/name.json``, indented (small result files are committed)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def protocol_recipe(recipe: Path, runs: Path, name: str, overrides: Sequence[str] = ()) -> Any:
    """``recipe`` for the run ``name``: silver data shared under ``runs/silver``, adapters and evaluation under
    ``runs/name``; every validation and test turn evaluated (the demo's time budget is for slower CPUs)."""
    from vista_distill.config import load_recipe

    d = runs / name
    return load_recipe(recipe, [f"distill.output_dir={runs / 'silver'}", f"train.output_dir={d / 'checkpoints'}",
                                f"eval.output_dir={d / 'eval'}", "eval.max_minutes=null", *overrides])


def choose(reference: float, candidates: Mapping[str, float], margin: float, default: str = "chosen") -> str:
    """The candidate with the highest validation score if it beats ``reference`` (the recipe as written) by more
    than ``margin``, else ``default``: a variant must earn its change."""
    best, best_score = default, reference
    for name, score in candidates.items():
        if name != default and score > reference + margin and score > best_score:
            best, best_score = name, score
    return best
