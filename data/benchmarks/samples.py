"""What the benchmark modules' ``build_sample`` functions share: where the bundled samples live
(``data/samples/``, described in its README), the references the demo's material must not share, and the
split by dialogue the BEGIN and FADE samples use."""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..io import read_conversations
from ..loading import normalise_text

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
# the files a shared-reference check reads, in the order the builders write them (faithdial first)
DEMO_FAITHDIAL = ("faithdial_balanced_sample.jsonl", "faithdial_models_train.jsonl",
                  "faithdial_models_validation.jsonl", "faithdial_scope_train.jsonl")


def demo_references(data: Path, samples: Path = SAMPLES) -> set[str]:
    """The normalised references of the demo's FaithDial material and of ``vista_human/dev.json``: rows of other
    training sources that share one are left out, so no test or validation turn shares a reference with training."""
    refs = set()
    for name in DEMO_FAITHDIAL:
        refs |= {normalise_text(t.reference) for c in read_conversations(samples / name) for t in c.turns
                 if t.reference}
    for conv in json.loads((data / "vista_human" / "dev.json").read_text()):
        refs |= {normalise_text(t.get("retrieved_document") or "") for t in conv}
    return refs - {""}


def split_by_dialogue(rows: list[tuple[str, bool]], per_label: int) -> tuple[list[int], list[int]]:
    """(validation, train) indices of ``rows`` ((dialogue id, faithful) pairs): whole dialogues, in an order
    shuffled with seed 0, to validation while both labels stay within ``per_label`` rows; then train: every other
    faithful row and as many hallucinated ones drawn with seed 1 (or the other way round), balanced by label."""
    dialogues: dict[str, list[int]] = {}
    for i, (did, _) in enumerate(rows):
        dialogues.setdefault(did, []).append(i)
    order = sorted(dialogues)
    random.Random(0).shuffle(order)
    val: list[int] = []
    count = {True: 0, False: 0}
    for did in order:
        add = {True: 0, False: 0}
        for i in dialogues[did]:
            add[rows[i][1]] += 1
        if all(count[k] + add[k] <= per_label for k in count):
            val += dialogues[did]
            for k in count:
                count[k] += add[k]
    taken = set(val)
    faithful = [i for i, (_, f) in enumerate(rows) if f and i not in taken]
    hallucinated = [i for i, (_, f) in enumerate(rows) if not f and i not in taken]
    n = min(len(faithful), len(hallucinated))
    rng = random.Random(1)
    train = sorted(rng.sample(faithful, n) + rng.sample(hallucinated, n))
    return sorted(val), train
