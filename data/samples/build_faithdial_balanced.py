"""Rebuild ``faithdial_balanced_sample.jsonl``: the demo's FaithDial material, balanced by label.

From FaithDial's data-audit gold files (McGill-NLP/FaithDial, ``data-audit/gold/{wow,cmu,topical}.csv``,
MIT License, Copyright (c) 2022 Nouha Dziri), read by the ``faithdial-audit`` loader:

* kept: responses annotated Entailment (faithful) and Hallucination / Partial Hallucination
  (hallucinated); Generic and Uncooperative rows are left out (no agreed VISTA mapping);
* balanced: every faithful response and as many hallucinated ones drawn with ``--seed``, so that a
  constant answer scores 50% on any random split of it (the majority label is still reported);
* one gold claim per turn, the response itself (the ``claims: response`` choice DialFact's loader
  documents: these responses are single utterances grounded on one knowledge sentence): VERIFIED for a
  faithful response, LACKING EVIDENCE for a hallucinated one. It is not a decomposition
  (``claims_complete: false``), so it gives stage 2 and 3 examples and no stage-1 example.

    python data/samples/build_faithdial_balanced.py [--gold ../shared/data/faithdial/data-audit/gold]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[2] / "shared" / "data" / "faithdial" / "data-audit" / "gold"
OUT = HERE / "faithdial_balanced_sample.jsonl"
KEEP = {"Entailment": "VERIFIED", "Hallucination": "LACKING EVIDENCE", "Partial Hallucination": "LACKING EVIDENCE"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gold", default=str(DEFAULT), help="FaithDial data-audit/gold folder")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from vista_distill.data.io import write_conversations
    from vista_distill.data.loaders import load_benchmark
    from vista_distill.data.schema import Claim

    faithful, hallucinated = [], []
    for name in ("wow", "cmu", "topical"):
        for c in load_benchmark("faithdial-audit", Path(args.gold) / f"{name}.csv", ambiguous="drop",
                                 on_error="reject").conversations:
            turn = c.turns[-1]
            label = KEEP.get(turn.meta.get("original_label", "").strip())
            if label is None:
                continue
            c.meta["file"] = f"data-audit/gold/{name}.csv"   # not the local path
            turn.gold_claims = [Claim(" ".join(turn.text.split()), label)]
            turn.meta["claims_complete"] = False            # the response as is, not a decomposition
            turn.meta["claims_source"] = "response as one claim (BEGIN label)"
            (faithful if label == "VERIFIED" else hallucinated).append(c)
    rng = random.Random(args.seed)
    picked = faithful + rng.sample(hallucinated, len(faithful))
    picked.sort(key=lambda c: c.id)
    write_conversations(picked, OUT)
    print(f"{OUT}: {len(faithful)} faithful + {len(faithful)} of {len(hallucinated)} hallucinated conversations")


if __name__ == "__main__":
    main()
