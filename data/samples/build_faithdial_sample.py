"""Rebuild ``faithdial_wow_sample.jsonl``: a seeded sample of the FaithDial data-audit gold WoW file.

FaithDial (McGill-NLP/FaithDial, data-audit/gold/wow.csv) is MIT-licensed (Copyright (c) 2022 Nouha
Dziri); the rows are copied unchanged into our schema by the ``faithdial-audit`` loader.

    python data/samples/build_faithdial_sample.py [--source ../shared/data/faithdial/data-audit/gold/wow.csv]
"""

from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[2] / "shared" / "data" / "faithdial" / "data-audit" / "gold" / "wow.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--source", default=str(DEFAULT))
    ap.add_argument("--n", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from vista_distill.data.io import write_conversations
    from vista_distill.data.loaders import load_benchmark
    from vista_distill.data.sampling import sample_conversations

    convs = load_benchmark("faithdial-audit", args.source).conversations
    for c in convs:
        c.meta["file"] = "data-audit/gold/wow.csv"  # not the local path
    out = HERE / "faithdial_wow_sample.jsonl"
    write_conversations(sample_conversations(convs, args.n, seed=args.seed), out)
    print(f"{out}: {args.n} of {len(convs)} conversations")


if __name__ == "__main__":
    main()
