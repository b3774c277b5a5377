"""The silver dataset on disk, one module for both sides: ``distill`` writes it (:func:`save_stage`), ``train``
reads and validates it (:func:`load_silver`).

``<silver_dir>/<stage>/`` is a ``DatasetDict`` (``save_to_disk``) with splits ``train`` and, optionally, ``validation``
(where choices are made): conversational ``prompt`` / ``completion`` columns, ``label`` (stages 2, 3 and world: one of
the stage's labels) and the provenance columns of :data:`COLUMNS`; ``<silver_dir>/manifest.json`` names the teacher and
fingerprints each stage. Every reading error names the file, split, row and conversation, and what was expected.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .io import atomic_write_text
from .vocabulary import DISTILLED_STAGES, LABELS

log = logging.getLogger(__name__)

COLUMNS = ("prompt", "completion", "label", "stage", "conversation_id", "dialogue_id", "source", "teacher",
           "prompt_style", "prompt_version")
REQUIRED_COLUMNS = ("prompt", "completion", "label")
# Stages whose answers are labels: class balance applies, and a row's label must be one of them.
STAGE_CLASSES: dict[str, tuple[str, ...]] = {s: LABELS[s] for s in DISTILLED_STAGES if LABELS[s]}


class SilverDataError(ValueError):
    """Silver data that cannot be trained on: the message names the file, split, row and expectation."""


# -- writing (distill) ----------------------------------------------------------------------------------------

def features() -> Any:
    from datasets import Features, Value

    message = {"role": Value("string"), "content": Value("string")}
    return Features({"prompt": [message], "completion": [message],
                     **{c: Value("string") for c in COLUMNS if c not in ("prompt", "completion")}})


def save_stage(folder: Path, splits: dict[str, list[dict[str, Any]]], card: str) -> None:
    """Write one stage's DatasetDict and card next to ``folder`` and swap it in (a killed export
    leaves the previous folder, or a ``.partial`` one the next run removes)."""
    from datasets import Dataset, DatasetDict

    partial = folder.with_name(f".{folder.name}.partial")
    old = folder.with_name(f".{folder.name}.old")
    for p in (partial, old):
        if p.exists():
            shutil.rmtree(p)
    feats = features()
    dd = DatasetDict({name: Dataset.from_dict({c: [r[c] for r in rs] for c in feats}, features=feats)
                      for name, rs in splits.items()})
    with _quiet_datasets():
        # An empty split needs an explicit shard, or load_from_disk cannot read it back.
        dd.save_to_disk(str(partial), num_shards={name: 1 for name, ds in dd.items() if len(ds) == 0})
    atomic_write_text(partial / "README.md", card)
    if folder.exists():
        folder.rename(old)
    partial.rename(folder)
    if old.exists():
        shutil.rmtree(old)


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No per-split "Saving the dataset" bars under the distill progress bar."""
    import datasets

    was_disabled = datasets.is_progress_bar_enabled() is False
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def clean_partial(out_dir: Path) -> None:
    """Remove what a killed export left behind; restore a stage folder caught mid-swap."""
    for stage in DISTILLED_STAGES:
        final, old = out_dir / stage, out_dir / f".{stage}.old"
        if old.exists() and not final.exists():
            old.rename(final)
        for p in (out_dir / f".{stage}.partial", old):
            if p.exists():
                shutil.rmtree(p)



# -- reading (train) ------------------------------------------------------------------------------------------

def read_manifest(root: str | Path) -> dict[str, Any]:
    """``<silver_dir>/manifest.json`` or ``{}`` when there is none."""
    path = Path(root) / "manifest.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise SilverDataError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise SilverDataError(f"{path}: expected a JSON object")
    prints = data.get("fingerprints")   # train reads these two: a stage's fingerprint, else the whole set's
    if not (prints is None or isinstance(prints, dict) and all(isinstance(v, (str, type(None)))
                                                                 for v in prints.values())):
        raise SilverDataError(f"{path}: field 'fingerprints': expected an object of stage -> fingerprint string")
    if not isinstance(data.get("fingerprint"), (str, type(None))):
        raise SilverDataError(f"{path}: field 'fingerprint': expected a string, "
                              f"got {type(data['fingerprint']).__name__}")
    return data


def load_silver(root: str | Path, stage: str):
    """The stage's ``DatasetDict`` (splits ``train`` and, optionally, ``validation``), validated."""
    from datasets import DatasetDict, load_from_disk

    path = Path(root) / stage
    if not path.exists():
        raise SilverDataError(
            f"{path}: no silver data for {stage} (expected a datasets.DatasetDict saved with save_to_disk, "
            "splits train/validation; write it with `vista-distill distill --config <recipe>` or set "
            "train.silver_dir)"
        )
    try:
        dd = load_from_disk(str(path))
    except Exception as e:  # noqa: BLE001 - datasets raises FileNotFoundError / ValueError / IndexError ...
        dd = _load_splits(path, e)
    if not isinstance(dd, DatasetDict):
        raise SilverDataError(f"{path}: expected a DatasetDict with splits train/validation, got a single "
                         f"{type(dd).__name__}")
    if "train" not in dd:
        raise SilverDataError(f"{path}: no 'train' split (found {sorted(dd)})")
    for split, ds in dd.items():
        if len(ds):
            validate_rows(ds, stage, f"{path}[{split}]")
    return dd


def _load_splits(path: Path, error: Exception):
    """Split by split: datasets cannot reload an empty split it saved (no arrow shard); such a split
    is dropped."""
    from datasets import DatasetDict, load_from_disk

    try:
        names = json.loads((path / "dataset_dict.json").read_text())["splits"]
    except (OSError, ValueError, KeyError):
        raise SilverDataError(f"{path}: not a dataset saved with save_to_disk ({error})") from error
    splits = {}
    for name in names:
        try:
            splits[name] = load_from_disk(str(path / name))
        except Exception as e:
            if any((path / name).glob("*.arrow")):
                raise SilverDataError(f"{path / name}: cannot load split {name!r} ({e})") from e
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
        raise SilverDataError(f"{where}: missing column(s) {missing}; expected at least {list(REQUIRED_COLUMNS)}")
    classes = STAGE_CLASSES.get(stage)
    cols = ["prompt", "completion", "label"]
    cols += [c for c in ("stage", "conversation_id") if c in ds.column_names]
    for i, row in enumerate(ds.select_columns(cols)):
        rid = f"{where} row {i}"
        if "conversation_id" in row:
            rid += f" (conversation {row['conversation_id']})"
        if "stage" in row and row["stage"] not in (stage, None, ""):
            raise SilverDataError(f"{rid}: stage {row['stage']!r} in the {stage} dataset")
        prompt = row["prompt"]
        if not (isinstance(prompt, list) and prompt and all(_is_message(m) for m in prompt)) \
                or prompt[-1]["role"] != "user":
            raise SilverDataError(f"{rid}: prompt must be a list of {{role, content}} messages ending with a user "
                             "message")
        answer = answer_text(row["completion"])
        if answer is None or not answer.strip():
            raise SilverDataError(f"{rid}: completion must be [{{'role': 'assistant', 'content': <non-empty "
                             "answer>}]")
        if classes is not None and row["label"] not in classes:
            raise SilverDataError(f"{rid}: label {row['label']!r} is not one of {list(classes)}")
