"""Scoring throughput: batched engine vs one request at a time (the authors' loop), same inputs.

Runs the three configurations in one process on the same backend and inputs and records wall time,
turns/s, the speed-up ratio and how far the outputs agree (claims, labels, verdicts):

* batched   : every ready request of a stage in one call, shared few-shot prefix encoded once;
* single    : one request per call, prefix cache still on;
* authors   : one request per call, no prefix cache (the authors' loop).

    python bench/score_throughput.py [--input ../shared/data/vista_human/dev.json] [--limit 8] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"
SAMPLE = ROOT / "data" / "samples" / "sample_dialogues.json"


def agreement(a: list[dict], b: list[dict]) -> dict[str, float]:
    same_claims = sum([c["text"] for c in x["claims"]] == [c["text"] for c in y["claims"]] for x, y in zip(a, b))
    pairs = [(c, d) for x, y in zip(a, b) for c, d in zip(x["claims"], y["claims"])]
    same_cat = sum(c["category"] == d["category"] for c, d in pairs)
    same_verdict = sum(x["verdicts"] == y["verdicts"] for x, y in zip(a, b))
    max_dp = max((abs(c["stage2"]["probs"][k] - d["stage2"]["probs"][k])
                  for c, d in pairs if c["stage2"] and d["stage2"] and c["stage2"]["probs"] and d["stage2"]["probs"]
                  for k in c["stage2"]["probs"]), default=0.0)
    return {"turns_same_claims": same_claims / len(a), "claims_same_category": same_cat / max(len(pairs), 1),
            "turns_same_verdicts": same_verdict / len(a), "max_stage2_prob_diff": max_dp}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(DEFAULT_INPUT if DEFAULT_INPUT.exists() else SAMPLE))
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (1 avoids OpenMP stalls when other jobs share the cores)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "score_throughput.md"))
    args = ap.parse_args()

    import torch

    from vista_distill.data.io import read_conversations
    from vista_distill.local_backend import TransformersBackend
    from vista_distill.scorer import VistaScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    convs = read_conversations(args.input)[: args.limit]
    backend = TransformersBackend(dtype=args.dtype)
    scorer = VistaScorer(backend=backend)
    load_before = os.getloadavg()
    runs = {}
    for name, batched, cache in (("batched", True, True), ("single", False, True), ("authors", False, False)):
        backend.use_prefix_cache = cache
        backend._prefixes.clear()
        t0 = time.perf_counter()
        res = scorer.score(convs, batched=batched)
        runs[name] = {"wall_s": time.perf_counter() - t0, "records": res.records, "run": res.summary["run"]}
        print(name, f"{runs[name]['wall_s']:.1f}s")
    load_after = os.getloadavg()
    turns = len(runs["batched"]["records"])
    lines = [
        "# Scoring throughput: batched vs one request at a time",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, no GPU; torch {torch.__version__}, "
        f"{args.dtype}, {torch.get_num_threads()} torch thread(s); model: embedded SmolLM2-135M-Instruct; few-shot prompts, label scoring for stages 2-3.",
        f"Input: `{Path(args.input).name}`, first {len(convs)} conversations, {turns} assistant turns. "
        f"Load average (1 min) before/after: {load_before[0]:.1f} / {load_after[0]:.1f} "
        "(other jobs were running on this shared machine; ratios from one run are comparable, absolute times less so).",
        "",
        "| mode | wall s | turns/s | prompt tokens | prefix tokens reused | speed-up vs authors |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    base = runs["authors"]["wall_s"]
    for name, r in runs.items():
        lines.append(f"| {name} | {r['wall_s']:.1f} | {turns / r['wall_s']:.3f} | {r['run'].get('prompt_tokens', 0)} | "
                     f"{r['run'].get('prefix_tokens_reused', 0)} | {base / r['wall_s']:.2f}x |")
    lines += ["", "Output agreement with the batched run:", "",
              "| mode | turns with same claims | claims with same category | turns with same verdicts | max stage-2 prob diff |",
              "| --- | ---: | ---: | ---: | ---: |"]
    result = {"input": args.input, "dtype": args.dtype, "turns": turns, "load": [load_before, load_after], "runs": {}}
    for name in ("single", "authors"):
        a = agreement(runs["batched"]["records"], runs[name]["records"])
        result["runs"][name] = {"wall_s": runs[name]["wall_s"], "agreement": a}
        lines.append(f"| {name} | {a['turns_same_claims']:.3f} | {a['claims_same_category']:.3f} | "
                     f"{a['turns_same_verdicts']:.3f} | {a['max_stage2_prob_diff']:.2g} |")
    result["runs"]["batched"] = {"wall_s": runs["batched"]["wall_s"]}
    lines += ["", "In float32 the three modes give identical claims, labels and verdicts (probabilities within 1e-4; "
              "`tests/test_local_backend.py`). In bfloat16 different batch shapes round differently, so a few "
              "near-tie outputs can differ; the table above measures how many."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
