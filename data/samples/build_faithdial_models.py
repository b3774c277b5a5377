"""Rebuild ``faithdial_models_train.jsonl`` and ``faithdial_models_validation.jsonl``: FaithDial's annotated
model responses (CTRL, DoHA and GPT-2 on WoW, CMU-DoG and Topical-Chat).

From FaithDial's data-audit model-output files (McGill-NLP/FaithDial, ``data-audit/{CTRL,DoHA,GPT2}/*.csv``,
MIT License, Copyright (c) 2022 Nouha Dziri), read by the ``faithdial-audit`` loader with ``ambiguous: drop``
(its BEGIN mapping: entailment -> faithful, any hallucination -> hallucinated; generic-only rows dropped):
198 faithful and 1,259 hallucinated responses, none sharing a knowledge snippet with the demo's test turns.

* validation (bench/demo_protocol.py ``val-models``): 100 faithful + 100 hallucinated, drawn with seed 0;
* train (`vista-distill demo`, a training-only source): the other 98 faithful + 98 of the other hallucinated,
  drawn with seed 1.

Each response is its turn's one gold claim (VERIFIED / LACKING EVIDENCE), as in ``build_faithdial_balanced.py``.

    python data/samples/build_faithdial_models.py [--audit ../shared/data/faithdial/data-audit]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[2] / "shared" / "data" / "faithdial" / "data-audit"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--audit", default=str(DEFAULT), help="FaithDial data-audit folder")
    args = ap.parse_args()
    from vista_distill.data.io import write_conversations
    from vista_distill.data.loaders import load_benchmark
    from vista_distill.data.schema import Claim

    faithful, hallucinated = [], []
    for path in sorted(Path(args.audit).glob("[CDG]*/*.csv")):
        for c in load_benchmark("faithdial-audit", path, ambiguous="drop", on_error="reject").conversations:
            c.meta["file"] = f"data-audit/{path.parent.name}/{path.name}"   # not the local path
            turn = c.turns[-1]
            label = "VERIFIED" if turn.gold_label == "faithful" else "LACKING EVIDENCE"
            turn.gold_claims = [Claim(" ".join(turn.text.split()), label)]
            turn.meta["claims_complete"] = False
            turn.meta["claims_source"] = "response as one claim (BEGIN label)"
            (faithful if label == "VERIFIED" else hallucinated).append(c)
    rng = random.Random(0)
    val_f, val_h = rng.sample(faithful, 100), rng.sample(hallucinated, 100)
    taken = {c.id for c in val_f + val_h}
    rest_f = [c for c in faithful if c.id not in taken]
    rest_h = [c for c in hallucinated if c.id not in taken]
    train = rest_f + random.Random(1).sample(rest_h, len(rest_f))
    for name, picked in (("validation", val_f + val_h), ("train", train)):
        write_conversations(picked, HERE / f"faithdial_models_{name}.jsonl")
        print(f"faithdial_models_{name}.jsonl: {len(picked)} responses")


if __name__ == "__main__":
    main()
