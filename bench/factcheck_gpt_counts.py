"""Factcheck-GPT through the project's loader: the published counts, and what each mapping choice gives.

Loads the full ``factcheck-GPT-benchmark.jsonl`` (not in a fresh clone: ../shared/data, or
``vista-distill data fetch factcheck_gpt``) with every option value of ``data/benchmarks/factcheck_gpt/``,
checks the published counts (94 answers, 311 sentences, 678 claims; 3,305 claim-passage stances)
and tabulates claim categories per stance pattern, categories against the annotators' factuality
labels, turn labels per labelling rule and reference sizes.

    python bench/factcheck_gpt_counts.py [--source ../shared/data/factcheck_gpt/factcheck-GPT-benchmark.jsonl]

Writes bench/results/factcheck_gpt_counts.md; exits 1 when a published count does not match.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "data" / "factcheck_gpt" / "factcheck-GPT-benchmark.jsonl"
PUBLISHED = {"answers": 94, "sentences": 311, "claims": 678, "stances": 3305}
VARIANTS = ({}, {"partial": "verified"}, {"evidence": "human"}, {"unclaimed": "out_of_scope"},
            {"turn_label": "response"}, {"turn_label": "response", "ambiguous": "faithful"})
STANCE_CODES = (("completely-support", "S"), ("refute", "R"), ("partially-support", "P"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(DEFAULT))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "factcheck_gpt_counts.md"))
    args = ap.parse_args(argv)
    source = Path(args.source)
    if not source.is_file():
        print(f"error: {source}: no such file (vista-distill data fetch factcheck_gpt --to DIR)", file=sys.stderr)
        return 1

    from vista_distill.data.benchmarks.factcheck_gpt import load_factcheck_gpt
    from vista_distill.data.schema import CLAIM_CATEGORIES

    loads = {_name(v): load_factcheck_gpt(source, **v) for v in VARIANTS}
    turns = {name: [c.turns[1] for c in res] for name, res in loads.items()}
    base = turns["default"]
    metas = [m for t in base for m in t.meta["claims"]]
    counts = {"answers": len(base), "sentences": sum(len(t.meta["sentences"]) for t in base),
              "claims": sum(len(t.gold_claims) for t in base), "stances": sum(len(m["stances"]) for m in metas)}
    ok = counts == PUBLISHED
    sha = hashlib.sha256(source.read_bytes()).hexdigest()

    lines = ["# Factcheck-GPT through `data/benchmarks/factcheck_gpt/`", "",
             f"`python bench/factcheck_gpt_counts.py` on `{os.path.relpath(source, ROOT)}` (sha256 `{sha[:16]}...`).",
             "Mapping choices: `data/benchmarks/factcheck_gpt/` docstring and `data/SOURCES.md`.", "",
             "## Published counts", "", "| unit | published | loaded |", "| --- | ---: | ---: |"]
    lines += [f"| {k} | {PUBLISHED[k]:,} | {counts[k]:,}{'' if counts[k] == PUBLISHED[k] else ' MISMATCH'} |"
              for k in PUBLISHED]
    stances = Counter(s for m in metas for s in m["stances"])
    lines += ["", "Passage stances: " + ", ".join(f"{k} {v:,}" for k, v in stances.most_common()), ""]

    lines += ["## Claim categories and turn labels per option", "",
              "| options | claims | " + " | ".join(CLAIM_CATEGORIES) + " | faithful | hallucinated | unlabelled "
              "| complete turns |", "| --- " + "| ---: " * (len(CLAIM_CATEGORIES) + 5) + "|"]
    for name, ts in turns.items():
        cats = Counter(c.label for t in ts for c in t.gold_claims)
        labels = Counter(t.gold_label for t in ts)
        lines.append(f"| {name} | {sum(cats.values())} | " + " | ".join(str(cats[c]) for c in CLAIM_CATEGORIES)
                     + f" | {labels['faithful']} | {labels['hallucinated']} | {labels[None]} "
                     f"| {sum(t.meta['claims_complete'] for t in ts)} |")

    lines += ["", "## Stance pattern of a claim's five passages -> category (default options)", "",
              "S = some completely-support, R = some refute, P = some partially-support; `-` = all irrelevant;",
              "non-factual claims have no stances.", ""]
    lines += _crosstab(Counter((_pattern(m), c.label) for t in base for c, m in zip(t.gold_claims, t.meta["claims"])),
                       "stances", CLAIM_CATEGORIES)
    lines += ["", "## Category (default options) against the annotators' factuality label", "",
              "The label is judged on retrieved and human evidence; the category on the retrieved passages only.", ""]
    lines += _crosstab(Counter((c.label, m["factuality"]) for t in base for c, m in zip(t.gold_claims, t.meta["claims"])),
                       "category", ("true", "false", "unknown"))
    lines += ["", "## Turn label: released VISTA rule on the claims (rows) against response_factuality (columns)", ""]
    lines += _crosstab(Counter((t.gold_label, str(t.meta["original_label"])) for t in base),
                       "from claims", ("True", "False", "NA"))
    undecomposed = Counter(t.meta["sentences"][i]["checkworthiness"] for t in base for i in t.meta["undecomposed_sentences"])
    lines += ["", f"Undecomposed sentences: {sum(undecomposed.values())} in "
              f"{sum(bool(t.meta['undecomposed_sentences']) for t in base)} turns ("
              + ", ".join(f"{k} {v}" for k, v in undecomposed.most_common()) + ")."]

    lines += ["", "## Reference size per turn", "", "| evidence | passages p50 | p90 | max | words p50 | p90 | max |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("default", "evidence=human"):
        ts = turns[name]   # passages are numbered 1..n in first use: the largest number is the count
        n = _spread([max([p for m in t.meta["claims"] for p in [*m["passages"], m.get("human_passage")] if p] or [0])
                     for t in ts])
        w = _spread([len(t.reference.split()) for t in ts])
        lines.append(f"| {name} | " + " | ".join(map(str, n + w)) + " |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"counts {counts} {'match' if ok else 'DO NOT MATCH'} the published ones; wrote {out}")
    return 0 if ok else 1


def _name(options: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items()) or "default"


def _pattern(meta: dict) -> str:
    if not meta["stances"]:
        return f"none ({meta['checkworthiness']})"
    return "".join(code for stance, code in STANCE_CODES if stance in meta["stances"]) or "-"


def _spread(values: list[int]) -> list[int]:
    v = sorted(values)
    return [v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.9))], v[-1]]


def _crosstab(cells: Counter, row_name: str, columns: tuple[str, ...]) -> list[str]:
    rows = sorted({r for r, _ in cells}, key=lambda r: -sum(n for (k, _), n in cells.items() if k == r))
    out = [f"| {row_name} | " + " | ".join(columns) + " | total |", "| --- " + "| ---: " * (len(columns) + 1) + "|"]
    for r in rows:
        vals = [cells[(r, c)] for c in columns]
        out.append(f"| {r} | " + " | ".join(str(v) for v in vals) + f" | {sum(vals)} |")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
