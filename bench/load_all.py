"""Load every data file under ../shared/data and reconcile the counts.

For each file: rows read = records out + rejected rows (with their reasons), loaded with
``on_error="reject"`` so nothing stops the sweep and nothing is dropped silently. Also lists the
files sharing dialogue contexts (the leakage keys of ``data.splits``), which matters whenever
training and test material come from these sources.

    python bench/load_all.py [--data-dir ../shared/data]

Writes bench/results/load_all.md and bench/results/load_all.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_SUFFIXES = {".tsv", ".csv", ".json", ".jsonl"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)

    from vista_distill.data.benchmarks import guess_benchmark, load_benchmark
    from vista_distill.data.splits import leak_keys

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"error: {data_dir}: no such directory", file=sys.stderr)
        return 1
    rows, skipped, keys = [], [], {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(data_dir).as_posix()
        if path.suffix not in DATA_SUFFIXES:
            skipped.append(rel)
            continue
        bench = guess_benchmark(path)
        t0 = time.perf_counter()
        try:
            result = load_benchmark(bench, path, on_error="reject")
        except Exception as e:  # a file no loader reads is a finding, not a crash
            rows.append({"file": rel, "benchmark": bench, "error": f"{type(e).__name__}: {e}"})
            print(f"{rel}: ERROR {e}")
            continue
        secs = time.perf_counter() - t0
        r = result.report
        scored = [t for c in result for t in c.turns if t.is_scored]
        rows.append({
            "file": rel, "benchmark": bench, "rows_read": r.rows_read, "records_out": r.records_out,
            "rejected": len(r.rejected), "reconciles": r.reconciles, "conversations": len(result),
            "scored_turns": len(scored),
            "faithful": sum(t.gold_label == "faithful" for t in scored),
            "hallucinated": sum(t.gold_label == "hallucinated" for t in scored),
            "claims": sum(len(t.gold_claims or []) for t in scored),
            "rejected_by_reason": r.rejected_by_reason(), "notes": r.notes, "seconds": round(secs, 3),
        })
        print(r.summary().replace(str(path), rel))
        keys[rel] = [leak_keys(c) for c in result]

    overlaps = []
    names = sorted(keys)
    union = {n: set().union(*keys[n]) for n in names}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = union[a] & union[b]
            if shared:
                overlaps.append({"a": a, "b": b, "a_conversations": sum(bool(k & shared) for k in keys[a]),
                                 "b_conversations": sum(bool(k & shared) for k in keys[b])})

    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"data_dir": os.path.relpath(data_dir, ROOT), "files": rows, "not_data": skipped, "overlaps": overlaps}
    (out_dir / "load_all.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    (out_dir / "load_all.md").write_text(render(payload))
    ok = all(r.get("reconciles") for r in rows)
    print(f"{len(rows)} data files, all reconciled: {ok}; wrote {out_dir / 'load_all.md'}")
    return 0 if ok else 1


def render(p: dict) -> str:
    lines = [
        "# Every file under ../shared/data, loaded and reconciled",
        "",
        "`python bench/load_all.py` (loaders with `on_error=\"reject\"`, default `ambiguous=\"hallucinated\"`).",
        "Rows read = records out + rejected, every rejection with its reason. A record is one scored turn "
        "(one claim-bearing turn for FineDialFact, one conversation for vista_human).",
        "",
        "| file | loader | rows read | records | rejected | ok | conversations | scored turns | faithful "
        "| hallucinated | claims |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in p["files"]:
        if "error" in r:
            lines.append(f"| {r['file']} | {r['benchmark']} | ERROR: {r['error']} | | | | | | | | |")
            continue
        lines.append(f"| {r['file']} | {r['benchmark']} | {r['rows_read']} | {r['records_out']} | {r['rejected']} "
                     f"| {'yes' if r['reconciles'] else 'NO'} | {r['conversations']} | {r['scored_turns']} "
                     f"| {r['faithful']} | {r['hallucinated']} | {r['claims']} |")
    tot = {k: sum(r.get(k, 0) for r in p["files"]) for k in ("rows_read", "records_out", "rejected")}
    lines.append(f"| **total** | | {tot['rows_read']} | {tot['records_out']} | {tot['rejected']} | | | | | | |")
    lines += ["", "## Rejected rows, by reason", ""]
    any_rej = False
    for r in p["files"]:
        for reason, n in (r.get("rejected_by_reason") or {}).items():
            lines.append(f"- {r['file']}: {n} x {reason}")
            any_rej = True
    if not any_rej:
        lines.append("- none")
    notes = [f"- {r['file']}: {n}" for r in p["files"] for n in r.get("notes") or []]
    if notes:
        lines += ["", "## Loader notes", "", *notes]
    lines += ["", "## Files sharing dialogue contexts", "",
              "Conversations whose scored-turn context (normalised history + reference, or last utterance + "
              "reference) also occurs in the other file: keep such files on one side of any train/test line "
              "(`data.splits.assert_no_leak`).", "",
              "| file A | file B | conversations of A | conversations of B |", "| --- | --- | ---: | ---: |"]
    lines += [f"| {o['a']} | {o['b']} | {o['a_conversations']} | {o['b_conversations']} |"
              for o in p["overlaps"]] or ["| none | | | |"]
    lines += ["", "## Not data (documentation, licences)", "", ", ".join(p["not_data"]), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
