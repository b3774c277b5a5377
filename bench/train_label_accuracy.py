"""Stage 2 / stage 3 label accuracy on a silver validation split: base model vs trained adapter.

The scorer's own backend picks each label by log-likelihood (the way ``vista-distill score`` runs
stages 2 and 3), once with the stage's adapter and once on the bare base model (a stage without an
adapter runs on the base model, so one loaded model answers both).

    python bench/train_label_accuracy.py --adapters checkpoints/smollm2-135m-cpu \
        --silver runs/smollm2-135m-cpu/silver --stage stage2 --output bench/results/train_stage2_accuracy.md
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", required=True, help="folder with <stage>/adapter_config.json")
    ap.add_argument("--silver", required=True)
    ap.add_argument("--stage", default="stage2", choices=("stage2", "stage3"))
    ap.add_argument("--split", default="validation")
    ap.add_argument("--model", default=None, help="base model (default: embedded)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--output", default=None)
    a = ap.parse_args()

    import torch
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.protocol import Request
    from vista_distill.pipeline.templates import get_template
    from vista_distill.train.silver_data import load_silver

    if a.threads:
        torch.set_num_threads(a.threads)
    rows = load_silver(a.silver, a.stage)[a.split]
    if a.limit:
        rows = rows.select(range(min(a.limit, len(rows))))
    labels = get_template(a.stage, "compact").labels
    backend = TransformersBackend(a.model, adapters={a.stage: Path(a.adapters) / a.stage})
    results = {}
    for system, stage_name in (("base", "stage4"), ("adapter", a.stage)):  # stage4 has no adapter: base model
        t = time.perf_counter()
        out = backend.run([Request(stage_name, tuple(r["prompt"]), labels=labels) for r in rows])
        pred = [o.label for o in out]
        gold = list(rows["label"])
        per_class = {c: (sum(p == g == c for p, g in zip(pred, gold)), gold.count(c)) for c in labels if c in gold}
        results[system] = {
            "accuracy": sum(p == g for p, g in zip(pred, gold)) / len(gold),
            "balanced_accuracy": sum(k / n for k, n in per_class.values()) / len(per_class),
            "per_class_recall": {c: f"{k}/{n}" for c, (k, n) in per_class.items()},
            "predicted": dict(Counter(pred)), "seconds": time.perf_counter() - t,
        }
        print(system, json.dumps(results[system]))
    if a.output:
        lines = [f"Stage {a.stage[-1]} labels on `{a.silver}/{a.stage}` [{a.split}] ({len(rows)} examples, gold "
                 f"{dict(Counter(rows['label']))}), chosen by log-likelihood as the scorer does; adapter "
                 f"`{a.adapters}/{a.stage}`.", "",
                 "| system | accuracy | balanced accuracy | recall per class | predicted |",
                 "| --- | ---: | ---: | --- | --- |"]
        for system, r in results.items():
            lines.append(f"| {system} | {r['accuracy']:.3f} | {r['balanced_accuracy']:.3f} | "
                         f"{', '.join(f'{c} {v}' for c, v in r['per_class_recall'].items())} | {r['predicted']} |")
        Path(a.output).write_text("\n".join(lines) + "\n")
        Path(a.output).with_suffix(".json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
