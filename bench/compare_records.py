"""Two runs' records of the same conversations, turn by turn: how many turns have the same stage-1 claims, the
same verdicts, and (where the claims are the same) the same categories. For a speed change that must not change
what the scorer says (bench/profile_scorer.py --records writes ``<pipeline>.jsonl`` per run).

    python bench/compare_records.py BEFORE_DIR AFTER_DIR [--out bench/results/NAME.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def compare(before: list[dict], after: list[dict]) -> dict:
    if [(r["conversation_id"], r["turn_index"]) for r in before] != [(r["conversation_id"], r["turn_index"]) for r in after]:
        raise SystemExit("the two runs scored different turns")
    pairs = [(a, b) for a, b in zip(before, after) if a.get("scored") and b.get("scored")]
    claims = lambda r: [c["text"] for c in r.get("claims", [])]  # noqa: E731
    same = [(a, b) for a, b in pairs if claims(a) == claims(b)]
    cats = [(x.get("category"), y.get("category")) for a, b in same for x, y in zip(a["claims"], b["claims"])]
    return {
        "turns": len(pairs), "same_claims": len(same),
        "same_verdict": {rule: sum(a["verdicts"].get(rule) == b["verdicts"].get(rule) for a, b in pairs)
                         for rule in ("safe", "strict")},
        "claims_on_same_claim_turns": len(cats), "same_category": sum(x == y for x, y in cats),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = {}
    for f in sorted(Path(a.before).glob("*.jsonl")):
        load = lambda p: [json.loads(line) for line in p.read_text().splitlines()]  # noqa: E731
        out[f.stem] = compare(load(f), load(Path(a.after) / f.name))
    text = json.dumps({"before": a.before, "after": a.after, "pipelines": out}, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
