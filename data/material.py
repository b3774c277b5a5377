"""A recipe's material: its data sources found (under the data root), loaded, split and leak-checked.

:func:`load_material` gives the teacher's train material and the held-out test material of a recipe
(``distill`` reads the first, ``eval`` the second, ``check`` and the demo both); :func:`load_source`
one ``data.train`` / ``data.test`` entry; :func:`resolve_source_path` where a source's file lives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .io import read_conversations
from .root import data_root, missing_source_message, resolve_source
from .schema import Conversation

if TYPE_CHECKING:   # annotations only: the recipe object sits above this layer
    from ..config import DataSource, Recipe

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
FILE_BENCHMARKS = ("conversations", "file")   # our JSONL or the authors' JSON, read as is


@dataclass
class Material:
    train: list[Conversation]
    test: list[Conversation]
    reports: list[dict[str, Any]] = field(default_factory=list)


def resolve_source_path(source: str, root: str | None = None) -> str:
    """Where a recipe's ``source`` lives: absolute or present as given; else under the data root
    (``data.root``, ``--data-root`` or ``$VISTA_DISTILL_DATA``); bundled files (``data/samples/...``)
    from any working directory. A missing file is a :class:`MissingDataError` saying how to get it."""
    p = Path(source)
    if not p.is_absolute() and not p.exists() and (PACKAGE_ROOT / p).exists():
        return str(PACKAGE_ROOT / p)
    base = data_root(root)
    path = resolve_source(source, base)
    if not path.exists() and not _hub_id(source):
        raise MissingDataError(source, base)
    return str(path)


def _hub_id(source: str) -> bool:
    # "McGill-NLP/FaithDial": loaders that accept a Hub dataset id (faithdial) resolve it themselves
    return source.count("/") == 1 and not Path(source).suffix and not source.startswith((".", "/", "~"))


class MissingDataError(FileNotFoundError):
    """A recipe names a data file that is not there; the message says where it was looked for and how to get it."""

    def __init__(self, source: str, root: Path | None) -> None:
        self.source, self.root = source, root
        super().__init__(missing_source_message(source, root))

    def __str__(self) -> str:
        return self.args[0]


def load_source(src: DataSource, root: str | None = None) -> tuple[list[Conversation], dict[str, Any]]:
    """Conversations of one recipe data source (sampled when ``n`` is set) and its load report."""
    from .sampling import sample_conversations

    path = resolve_source_path(src.source, root)
    if src.benchmark in FILE_BENCHMARKS:
        convs = read_conversations(path)
        report: dict[str, Any] = {"conversations": len(convs)}
    else:
        from .benchmarks import load_benchmark

        result = load_benchmark(src.benchmark, path, split=src.split, **src.options)
        convs, r = list(result.conversations), result.report
        report = {"rows_read": r.rows_read, "records_out": r.records_out, "conversations": r.conversations,
                  "rejected": len(r.rejected), "rejected_by_reason": r.rejected_by_reason()}
    loaded = len(convs)
    if src.n:
        convs = sample_conversations(convs, src.n, src.seed)
    return convs, {"benchmark": src.benchmark, "source": src.source, "split": src.split, "n": src.n,
                   "seed": src.seed, "loaded": loaded, "conversations": len(convs), "load_report": report}


def load_material(recipe: Recipe) -> Material:
    """Train and test material of a recipe.

    With ``data.test_fraction`` > 0 each train source is split by dialogue (so every source is represented on both
    sides; a source with ``hold_out: false`` stays whole on the train side) and ``data.test`` sources are added to the
    test side. A test dialogue that is also in train is handled by ``data.leaks``: ``error`` (``LeakageError``),
    ``drop-test`` or ``drop-train`` (the leaking conversations leave that side, counted in the reports). Two
    conversations with the same id are an error (eval pairs systems by conversation id and turn).
    """
    from .loading import validate_unique_ids
    from .splits import assert_no_leak, drop_leaks, reference_keys, split_by_dialogue

    if not recipe.data.train:
        raise ValueError(f"{recipe.path or 'recipe'}: data.train lists no sources for the teacher")
    train: list[Conversation] = []
    test: list[Conversation] = []
    reports = []
    f = recipe.data.test_fraction
    root = recipe.data.root
    loaded: list[tuple[str, list[Conversation]]] = []   # (where, as loaded): duplicate ids are named by both places
    held: list[tuple[dict, list[Conversation]]] = []     # (a source's split report, its held-out conversations)
    for i, src in enumerate(recipe.data.train):
        convs, report = load_source(src, root)
        loaded.append((f"data.train[{i}] {src.source}", list(convs)))
        if f > 0 and src.hold_out:
            parts = split_by_dialogue(convs, {"train": 1.0 - f, "test": f}, seed=recipe.data.seed,
                                      by_reference=recipe.data.split_by == "reference")
            train += parts["train"]
            report["split"] = {"train": len(parts["train"]), "test": len(parts["test"])}
            held.append((report["split"], parts["test"]))
        else:
            train += convs
        reports.append({"role": "train", **report})
    seen = set().union(*(reference_keys(c) for c in train)) if recipe.data.split_by == "reference" else set()
    for split, part in held:
        # split_by reference: a held-out turn whose reference the student trains on (with another response) is not
        # held out, whichever source that training conversation comes from
        moved = [c for c in part if reference_keys(c) & seen]
        if moved:
            split.update(train=split["train"] + len(moved), test=split["test"] - len(moved), moved_to_train=len(moved))
            train += moved
        test += [c for c in part if not (reference_keys(c) & seen)]
    test_reports = []
    for i, src in enumerate(recipe.data.test):
        convs, report = load_source(src, root)
        loaded.append((f"data.test[{i}] {src.source}", list(convs)))
        if recipe.data.leaks == "drop-test":
            convs, leaks = drop_leaks(convs, train)
            report["dropped_leaks"] = len(leaks)
        test += convs
        test_reports.append({"role": "test", **report})
    if recipe.data.leaks == "drop-train" and test:
        before = len(train)
        train, leaks = drop_leaks(train, test)
        reports.append({"role": "train", "dropped_leaks": before - len(train),
                        "dropped_ids": sorted(lk.test_id for lk in leaks)})
    reports += test_reports
    assert_no_leak(train, test)
    kept = {id(c) for c in train + test}
    validate_unique_ids(loaded, keep=lambda c: id(c) in kept)
    return Material(train, test, reports)


__all__ = ["FILE_BENCHMARKS", "Material", "MissingDataError", "load_material", "load_source", "resolve_source_path"]
