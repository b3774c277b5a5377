"""The silver data a stage trains on, as ``vista-distill distill`` exports it, loaded and validated.

``<silver_dir>/<stage>/`` is a ``DatasetDict`` (``save_to_disk``) with splits ``train`` and, optionally,
``test``, and conversational ``prompt``/``completion`` columns plus ``label`` (stages 2 and 3: one of the
stage's labels); ``<silver_dir>/manifest.json`` names the teacher and fingerprints each stage. Every
error names the file, split, row and conversation, and what was expected.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Recipe
from ..data.vocabulary import DISTILLED_STAGES, LABELS, STAGES

log = logging.getLogger(__name__)

# Stages whose answers are labels: class balance applies.
STAGE_CLASSES: dict[str, tuple[str, ...]] = {s: LABELS[s] for s in DISTILLED_STAGES if LABELS[s]}
REQUIRED_COLUMNS = ("prompt", "completion", "label")

__all__ = ["DISTILLED_STAGES", "STAGES", "STAGE_CLASSES", "TrainError", "answer_text", "load_silver", "read_manifest",
           "silver_fingerprint", "silver_root", "validate_rows"]


class TrainError(ValueError):
    """Bad training input (silver data, recipe): the message names the file, record and expectation."""


def silver_root(recipe: Recipe) -> Path:
    """Folder of the ``stage1/ stage2/ stage3/`` silver datasets (``train.silver_dir``, else
    ``distill.output_dir``)."""
    return Path(recipe.resolve(recipe.train.silver_dir or recipe.distill.output_dir))


def read_manifest(root: str | Path) -> dict[str, Any]:
    """``<silver_dir>/manifest.json`` or ``{}`` when there is none."""
    path = Path(root) / "manifest.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise TrainError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise TrainError(f"{path}: expected a JSON object")
    return data


def load_silver(root: str | Path, stage: str):
    """The stage's ``DatasetDict`` (splits ``train`` and, optionally, ``test``), validated."""
    from datasets import DatasetDict, load_from_disk

    path = Path(root) / stage
    if not path.exists():
        raise TrainError(
            f"{path}: no silver data for {stage} (expected a datasets.DatasetDict saved with save_to_disk, "
            "splits train/test; write it with `vista-distill distill --config <recipe>` or set "
            "train.silver_dir)"
        )
    try:
        dd = load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - datasets raises FileNotFoundError / ValueError / IndexError ...
        dd = _load_splits(path, e)
    if not isinstance(dd, DatasetDict):
        raise TrainError(f"{path}: expected a DatasetDict with splits train/test, got a single "
                         f"{type(dd).__name__}")
    if "train" not in dd:
        raise TrainError(f"{path}: no 'train' split (found {sorted(dd)})")
    for split, ds in dd.items():
        if len(ds):
            validate_rows(ds, stage, f"{path}[{split}]")
    return dd


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


def _load_splits(path: Path, error: Exception):
    """Split by split: datasets cannot reload an empty split it saved (no arrow shard); such a split
    is dropped."""
    from datasets import DatasetDict, load_from_disk

    try:
        names = json.loads((path / "dataset_dict.json").read_text())["splits"]
    except (OSError, ValueError, KeyError):
        raise TrainError(f"{path}: not a dataset saved with save_to_disk ({error})") from error
    splits = {}
    for name in names:
        try:
            splits[name] = load_from_disk(str(path / name))
        except Exception as e:
            if any((path / name).glob("*.arrow")):
                raise TrainError(f"{path / name}: cannot load split {name!r} ({e})") from e
            log.warning("%s: split %r is empty, ignored", path, name)
    return DatasetDict(splits)


def answer_text(completion: Any) -> str | None:
    """The assistant answer of a ``completion`` cell (conversational list or plain string)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and len(completion) == 1 and isinstance(completion[0], Mapping) \
            and completion[0].get("role") == "assistant" and isinstance(completion[0].get("content"), str):
        return completion[0]["content"]
    return None


def _is_message(m: Any) -> bool:
    return isinstance(m, Mapping) and isinstance(m.get("content"), str) and m.get("role") in (
        "system", "user", "assistant")


def validate_rows(ds, stage: str, where: str) -> None:
    """Check columns and every row; the error names the split, row, conversation and what was expected."""
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise TrainError(f"{where}: missing column(s) {missing}; expected at least {list(REQUIRED_COLUMNS)}")
    classes = STAGE_CLASSES.get(stage)
    cols = ["prompt", "completion", "label"]
    cols += [c for c in ("stage", "conversation_id") if c in ds.column_names]
    for i, row in enumerate(ds.select_columns(cols)):
        rid = f"{where} row {i}"
        if "conversation_id" in row:
            rid += f" (conversation {row['conversation_id']})"
        if "stage" in row and row["stage"] not in (stage, None, ""):
            raise TrainError(f"{rid}: stage {row['stage']!r} in the {stage} dataset")
        prompt = row["prompt"]
        if not (isinstance(prompt, list) and prompt and all(_is_message(m) for m in prompt)) \
                or prompt[-1]["role"] != "user":
            raise TrainError(f"{rid}: prompt must be a list of {{role, content}} messages ending with a user "
                             "message")
        answer = answer_text(row["completion"])
        if answer is None or not answer.strip():
            raise TrainError(f"{rid}: completion must be [{{'role': 'assistant', 'content': <non-empty "
                             "answer>}]")
        if classes is not None and row["label"] not in classes:
            raise TrainError(f"{rid}: label {row['label']!r} is not one of {list(classes)}")


def silver_fingerprint(dd, manifest: Mapping[str, Any], stage: str) -> str:
    """The stage's fingerprint from the distill manifest, else the datasets' own fingerprints."""
    return (manifest.get("fingerprints") or {}).get(stage) or manifest.get("fingerprint") or "+".join(
        f"{split}:{ds._fingerprint}" for split, ds in sorted(dd.items()))
