"""python bench/train_loss_path.py --recipe recipes/smollm2-135m-cpu.yaml --silver runs/smollm2-135m-cpu/silver

The stage trainer's CPU head against TRL's own, on the same steps of a stage: ``labelled`` (train/trainer.py
StageForward: the labelled positions only through the vocabulary) and ``trl-chunked_nll`` (SFTConfig
``loss_type="chunked_nll"``, which TRL computes as its nll: its fused head, every position through the vocabulary off
Triton devices). Each run in a fresh process, the paths alternated ``--repeats`` times; measured: seconds per step and
tokens/s after the first ``--warmup`` steps, peak RSS; compared: the logged losses per step and the adapter weights
after the last step. Writes ``results/train_loss_path/<cpu>.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import ROOT, commit, machine, result_name, save

PATHS = {"labelled": [], "trl-chunked_nll": ["train.options={loss_type: chunked_nll}"]}


def train_steps(recipe: str, silver: str, stage: str, path: str, steps: int, adapter: str,
                overrides: list[str]) -> dict[str, Any]:
    """One run, in this process: ``steps`` optimizer steps of ``stage`` on ``path``, the adapter saved to ``adapter``;
    the seconds and tokens of each step, the logged losses and the peak RSS."""
    from transformers import TrainerCallback

    from vista_distill.config import load_recipe
    from vista_distill.train import run as sft

    with tempfile.TemporaryDirectory() as tmp:
        fixed = [f"train.silver_dir={silver}", f"train.output_dir={tmp}", f"train.max_steps={steps}",
                 "train.eval_steps=0", "train.save_steps=100000", "train.resume=false", "train.logging_steps=1",
                 "train.cpu_threads=1"]
        per_stage = load_recipe(recipe, overrides).train.per_stage   # the stage's own settings, for these steps only
        fixed.append(f"train.per_stage.{stage}.max_steps={steps}" if stage in per_stage else "train.per_stage={}")
        run = sft.prepare_stage(load_recipe(recipe, fixed + PATHS[path] + overrides), stage)
        trainer = run.trainer
        trainer.label_positions_only = path == "labelled"
        marks: list[tuple[float, int]] = []

        class Clock(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                marks.append((time.perf_counter(), trainer.train_tokens))

        trainer.add_callback(Clock())
        marks.append((time.perf_counter(), 0))
        trainer.train()
        trainer.save_model(adapter)
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        return {"path": path, "loss_type": trainer.args.loss_type, "marks": marks, "losses": losses,
                "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "load_avg_1m_end": os.getloadavg()[0]}


def timing(row: dict[str, Any], warmup: int) -> dict[str, float]:
    """Seconds per step and tokens/s over the steps after ``warmup``."""
    (ta, ka), (tb, kb) = row["marks"][warmup], row["marks"][-1]
    n = len(row["marks"]) - 1 - warmup
    return {"s_per_step": (tb - ta) / n, "tokens_per_s": (kb - ka) / (tb - ta), "tokens_per_step": (kb - ka) / n}


def adapter_difference(a: str, b: str) -> dict[str, Any]:
    """How far two saved adapters are apart: tensors equal bit for bit, the largest absolute difference and the
    largest relative (Frobenius) difference of a tensor."""
    from safetensors.torch import load_file

    x, y = (load_file(str(Path(d) / "adapter_model.safetensors")) for d in (a, b))
    assert x.keys() == y.keys()
    diffs = {k: (x[k].float() - y[k].float()) for k in x}
    return {"tensors": len(x), "bitwise_equal": sum(bool((x[k] == y[k]).all()) for k in x),
            "max_abs_diff": max(d.abs().max().item() for d in diffs.values()),
            "max_relative_diff": max((d.norm() / x[k].float().norm().clamp(min=1e-30)).item()
                                     for k, d in diffs.items())}


def child(a: argparse.Namespace, path: str, adapter: str) -> dict[str, Any]:
    """:func:`train_steps` in a fresh process (nothing cached from the other path)."""
    job = {"recipe": a.recipe, "silver": a.silver, "stage": a.stage, "path": path, "steps": a.warmup + a.steps,
           "adapter": adapter, "overrides": a.override}
    proc = subprocess.run([sys.executable, __file__, "--_one", json.dumps(job)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{path}: failed\n{proc.stderr[-3000:]}")
    return json.loads(line[7:])


def summary(runs: list[dict[str, Any]], a: argparse.Namespace, adapters: dict[str, str]) -> dict[str, Any]:
    """Per path: the median timing over its runs, its peak RSS and losses; the two paths' losses and adapters
    compared (their first runs)."""
    out: dict[str, Any] = {}
    for path in PATHS:
        mine = [r for r in runs if r["path"] == path]
        times = [timing(r, a.warmup) for r in mine]
        out[path] = {"loss_type": mine[0]["loss_type"], "runs": times,
                     **{k: statistics.median(t[k] for t in times) for k in times[0]},
                     "peak_rss_gb": max(r["peak_rss_gb"] for r in mine), "losses": mine[0]["losses"]}
    la, lb = out["labelled"]["losses"], out["trl-chunked_nll"]["losses"]
    speed = out["labelled"]["tokens_per_s"] / out["trl-chunked_nll"]["tokens_per_s"]
    return {"paths": out, "labelled_speedup": speed,
            "loss_abs_diff_per_step": [abs(x - y) for x, y in zip(la, lb)],
            "loss_rel_diff_per_step": [abs(x - y) / abs(y) for x, y in zip(la, lb)],
            "adapters": adapter_difference(adapters["labelled"], adapters["trl-chunked_nll"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="recipes/smollm2-135m-cpu.yaml")
    ap.add_argument("--silver", default="runs/smollm2-135m-cpu/silver")
    ap.add_argument("--stage", default="stage2")
    ap.add_argument("--steps", type=int, default=3, help="measured steps")
    ap.add_argument("--warmup", type=int, default=1, help="steps left out of the timing (trained all the same)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each path, alternated")
    ap.add_argument("--override", action="append", default=[], help="a recipe override (repeatable)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "train_loss_path"))
    ap.add_argument("--_one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._one:  # child process: one run
        print("RESULT " + json.dumps(train_steps(**json.loads(a._one))), flush=True)
        return
    m = {**machine(), "torch_threads": 1, "uptime": subprocess.run(["uptime"], capture_output=True,
                                                                   text=True).stdout.strip()}
    runs, adapters = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeats):
            for path in PATHS:
                adapters.setdefault(path, f"{tmp}/{path}-{i}")
                runs.append(child(a, path, f"{tmp}/{path}-{i}"))
                t = timing(runs[-1], a.warmup)
                print(f"{path:16s} {t['s_per_step']:6.2f} s/step {t['tokens_per_s']:7.0f} tok/s  "
                      f"RSS {runs[-1]['peak_rss_gb']:.2f} GB  losses {[round(x, 4) for x in runs[-1]['losses']]}",
                      flush=True)
        result = {"commit": commit(), "machine": m, "load_avg_1m_end": os.getloadavg()[0], "recipe": a.recipe,
                  "silver": a.silver, "stage": a.stage, "overrides": a.override, "steps": a.warmup + a.steps,
                  "warmup": a.warmup, "repeats": a.repeats, "compared": __doc__.split("\n\n")[1].replace("\n", " "),
                  **summary(runs, a, adapters)}
    print(f"wrote {save(Path(a.out), result_name(m), result)}")


if __name__ == "__main__":
    main()
