"""How many VERIFIED / CONTRADICTED pairs ``distill/augment.py`` makes from real references.

For the bundled FaithDial sample (``data/samples/faithdial_wow_sample.jsonl``) and the VISTA human dev
set (``../shared/data/vista_human/dev.json``, skipped when absent): the scored turns' references, their
sentences and why the filter left some out, the pairs per rule and origin (a value of the same
reference, or a nearby one) at 1 and 3 pairs per reference, and 5 random examples (original ->
falsified). No model, no teacher: the references alone.

    python bench/augment_counts.py [--seed 0]

Writes bench/results/augment_counts.md.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"FaithDial sample": ROOT / "data" / "samples" / "faithdial_wow_sample.jsonl",
           "VISTA human dev": ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"}


def section(name: str, path: Path, seed: int) -> list[str]:
    from vista_distill.data.io import read_conversations
    from vista_distill.distill.augment import RULES, falsify, rejection, sentences

    refs = [t.reference for c in read_conversations(path) for t in c.turns if t.is_scored and t.reference]
    sents = [s for r in refs for s in sentences(r)]
    why = Counter(rejection(s) or "kept" for s in sents)
    single = sum(len(sentences(r)) == 1 for r in refs)
    lines = [f"## {name}", "", f"`{os.path.relpath(path, ROOT)}`: {len(refs)} references ({single} of one sentence), "
             f"{len(sents)} sentences; "
             "filter: " + ", ".join(f"{k} {v}" for k, v in why.most_common()) + ".", "",
             "| pairs per reference | references with a pair | pairs | " + " | ".join(RULES)
             + " | from the same reference | nearby value |", "|---:|---:|---:|" + "---:|" * (len(RULES) + 2)]
    one: list = []
    for n in (1, 3):
        per_ref = [falsify(r, n, seed) for r in refs]
        pairs = [p for ps in per_ref for p in ps]
        one = one or pairs
        rules = Counter(p.rule for p in pairs)
        origin = Counter(p.origin for p in pairs)
        lines.append(f"| {n} | {sum(bool(ps) for ps in per_ref)} | {len(pairs)} | "
                     + " | ".join(str(rules[r]) for r in RULES) + f" | {origin['document']} | {origin['nearby']} |")
    lines += ["", "5 random pairs (1 per reference):", ""]
    for p in random.Random(seed).sample(one, min(5, len(one))):
        lines += [f"- **{p.rule}** ({p.kind}, {p.origin}): `{p.old}` -> `{p.new}`",
                  f"  - original: {' '.join(p.original.split())}",
                  f"  - falsified: {' '.join(p.falsified.split())}"]
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "augment_counts.md"))
    args = ap.parse_args(argv)
    lines = ["# Rule-made VERIFIED / CONTRADICTED pairs from references (distill/augment.py)", "",
             (f"Written by `python bench/augment_counts.py --seed {args.seed}`. One pair: a factual sentence of a "
              "scored turn's reference (the VERIFIED claim) and the same sentence with one number, date or "
              "capitalised entity swapped (the CONTRADICTED claim); `distill.augment_falsified: N` makes up to N "
              "per reference, one per sentence. A swap's value comes from another sentence of the same "
              "reference, never from the sentence itself: a one-sentence reference gets nearby numbers and "
              "dates only, and no entity swap."), ""]
    for name, path in SOURCES.items():
        if not path.is_file():
            print(f"skipped {name}: {path} not found", file=sys.stderr)
            lines += [f"## {name}", "", f"skipped: `{path}` not found.", ""]
            continue
        lines += section(name, path, args.seed)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
