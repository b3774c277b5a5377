"""The silver data a stage trains on: where it is for a recipe, which sources to keep, its fingerprint. The format
itself (columns, reading, validation) is ``data/silver.py``, the module distill writes it with."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Recipe
from ..data.silver import (  # noqa: F401 - what train reads, re-exported
    REQUIRED_COLUMNS,
    STAGE_CLASSES,
    SilverDataError,
    answer_text,
    load_silver,
    read_manifest,
    validate_rows,
)
from ..data.vocabulary import DISTILLED_STAGES, STAGES

log = logging.getLogger(__name__)


__all__ = ["DISTILLED_STAGES", "STAGES", "STAGE_CLASSES", "TrainError", "answer_text", "load_silver", "read_manifest",
           "silver_fingerprint", "silver_root", "validate_rows", "SilverDataError"]


class TrainError(SilverDataError):
    """Bad training input beyond the silver data's format (sources, a changed silver set): the message names the
    file, record and expectation. Reading errors are :class:`SilverDataError`, its parent."""


def silver_root(recipe: Recipe) -> Path:
    """Folder of the ``stage1/ stage2/ stage3/`` silver datasets (``train.silver_dir``, else
    ``distill.output_dir``)."""
    return Path(recipe.resolve(recipe.train.silver_dir or recipe.distill.output_dir))


def select_sources(dd, sources: list[str] | None, where: str | Path):
    """Keep the examples of ``sources`` (the silver ``source`` column: FaithDial, Factcheck-GPT, ...) in every
    split, with the rows made by rule from them (``FaithDial+swapped``, ``FaithDial+falsified``: distill/augment.py);
    None keeps all. A named source with no example in train is an error (a typo would train on nothing)."""
    if sources is None:
        return dd
    found = set(dd["train"]["source"]) if "source" in dd["train"].column_names else set()
    missing = [s for s in sources if s not in found and s not in {f.split("+", 1)[0] for f in found}]
    if missing:
        raise TrainError(f"{where}[train]: train.sources {missing} have no example; sources present: {sorted(found)}")
    keep = set(sources)
    for split in list(dd):
        dd[split] = dd[split].filter(lambda row: row["source"] in keep or row["source"].split("+", 1)[0] in keep,
                                     keep_in_memory=True)
    return dd


def silver_fingerprint(dd, manifest: Mapping[str, Any], stage: str) -> str:
    """The stage's fingerprint from the distill manifest, else the datasets' own fingerprints."""
    return (manifest.get("fingerprints") or {}).get(stage) or manifest.get("fingerprint") or "+".join(
        f"{split}:{ds._fingerprint}" for split, ds in sorted(dd.items()))
