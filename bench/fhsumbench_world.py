"""FHSumBench dev, three-way verdicts on the embedded model: random, the study's vanilla judge, VISTA with the
world-knowledge stage (few-shot prompts, the model's own knowledge or the article searched "concurrently").

    python bench/fhsumbench_world.py [--per-label 40] [--seed 0] [--knowledge model|concurrent] [--threads 2]

Reads ``../shared/data/fhsumbench/dev.json`` (no licence: measurement only; nothing of it is written into
the project, only counts and scores). ``--per-label N`` takes a seeded sample of N summaries per label (all
when 0). Writes ``bench/results/fhsumbench_world_<cpu>[_<tag>].json`` and ``.md``: macro P/R/F1 over the three
labels beside the published rows, each label's accuracy, confusion matrices, the share of claims that reached
the world stage, and seconds per summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "fhsumbench" / "dev.json"


def sample(rows: list[dict], per_label: int, seed: int) -> list[dict]:
    """A seeded sample of ``per_label`` summaries per label (all of a label when it has fewer), by id."""
    rng = random.Random(seed)
    picked = []
    for label in ("no_hallu", "factual_hallu", "non_factual_hallu"):
        group = [r for r in rows if r["label"] == label]
        picked += rng.sample(group, min(per_label, len(group)))
    return sorted(picked, key=lambda r: r["id"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(DEV))
    ap.add_argument("--per-label", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--knowledge", choices=("model", "concurrent"), default="model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--systems", default="world_judge,base")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--from-eval", default=None, help="write the result files from an eval folder of an earlier run")
    a = ap.parse_args()

    from vista_distill.config import load_recipe
    from vista_distill.eval.run import run_eval
    from vista_distill.runtime.hardware import detect, short_cpu_label

    rows = json.loads(Path(a.input).read_text(encoding="utf-8"))
    if a.per_label:
        rows = sample(rows, a.per_label, a.seed)
    work = Path(tempfile.mkdtemp(prefix="fhsumbench-"))
    subset = work / "fhsumbench" / "dev.json"   # the path names the benchmark for the loader
    subset.parent.mkdir(parents=True)
    subset.write_text(json.dumps(rows))
    overrides = ["pipeline.world.enabled=true", f"eval.threads={a.threads}", "eval.given_claims=false",
                 "eval.bootstrap=200"]
    if a.knowledge == "concurrent":
        overrides.append("pipeline.world.concurrent=true")
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml", overrides)
    t0 = time.perf_counter()
    if a.from_eval:   # an eval folder this script wrote before (the run's results and records)
        eval_dir = Path(a.from_eval)
        res = json.loads((eval_dir / "results.json").read_text())
        wall = res["wall_s"]
    else:
        eval_dir = work / "eval"
        res = run_eval(recipe, input_path=str(subset), systems=a.systems.split(","), output_dir=eval_dir,
                       progress=True).results
        wall = time.perf_counter() - t0
    base_file = eval_dir / "records" / "base.jsonl"
    base_records = [r for r in map(json.loads, base_file.read_text().splitlines()) if r["scored"]] \
        if base_file.exists() else []
    claims = [c for r in base_records for c in r["claims"]]
    out = {
        "cpu": detect("cpu").describe(), "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": "python bench/fhsumbench_world.py " + " ".join(sys.argv[1:]),
        "input": "../shared/data/fhsumbench/dev.json", "summaries": len(rows),
        "sample": f"{a.per_label} per label, seed {a.seed}" if a.per_label else "all",
        "labels": {lab: sum(r["label"] == lab for r in rows) for lab in ("no_hallu", "factual_hallu", "non_factual_hallu")},
        "knowledge": a.knowledge, "model": "embedded SmolLM2-135M-Instruct, few-shot prompts (VISTA + world stage)",
        "world": res["world"], "wall_s": round(wall, 1),
        "seconds_per_summary": {n: round(s["efficiency"]["wall_s"] / len(rows), 2)
                                for n, s in res["systems"].items() if s.get("efficiency")},
        "base_claims": len(claims), "base_claims_at_world_stage": sum(c.get("world") is not None for c in claims),
        "vista_turn_accuracy_safe": {n: (res["metrics"][n]["overall"]["turn"]["safe"].get("accuracy"))
                                     for n in res["metrics"]},
        "conversation_ids_sha256": res["material"]["conversation_ids_sha256"],
    }
    stem = f"fhsumbench_world_{short_cpu_label()}" + (f"_{a.tag}" if a.tag else "")
    (Path(a.out) / f"{stem}.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [f"# FHSumBench dev: three-way verdicts at 135M ({out['sample']})", "",
             f"CPU: {out['cpu']}; {a.threads} threads; {out['date']}. Command: `{out['command']}`. Input: "
             f"{out['summaries']} summaries of `{out['input']}` ({out['labels']}); measurement only, no FHSumBench "
             "text is stored here.", "",
             "| system | macro P | macro R | macro F1 | acc faithful | acc factual | acc non-factual | unknown | s / summary |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, m in res["world"]["systems"].items():
        lines.append(f"| {name} | {m['macro_precision']:.4f} | {m['macro_recall']:.4f} | {m['macro_f1']:.4f} | "
                     + " | ".join(f"{x:.4f}" for x in m["label_accuracy"].values())
                     + f" | {m['unknown']} | {out['seconds_per_summary'].get(name, '')} |")
    for name, f1 in res["world"]["published_macro_f1"].items():
        lines.append(f"| published (all 1,336): {name} | | | {f1:.4f} | | | | | |")
    lines += ["", f"VISTA + world stage (base): {out['base_claims_at_world_stage']} of {out['base_claims']} claims "
              "reached the world stage (LACKING EVIDENCE).", ""]
    for name, m in res["world"]["systems"].items():
        c = m["confusion"]
        lines += [f"Confusion, {name} (rows gold, columns predicted):", "",
                  "| gold \\ predicted | " + " | ".join(c["columns (predicted)"]) + " |",
                  "| --- |" + " ---: |" * len(c["columns (predicted)"])]
        lines += [f"| {g} | " + " | ".join(map(str, row)) + " |" for g, row in zip(c["rows (gold)"], c["matrix"])]
        lines.append("")
    (Path(a.out) / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(Path(a.out) / f"{stem}.md")


if __name__ == "__main__":
    main()
