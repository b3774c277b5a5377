"""Where a training step of the stage trainer spends its time: one stage's trainer as ``train`` builds it
(``train/run.py prepare_stage``), a few optimizer-free forward+backward steps on real batches, the
no-grad forward of the same batch for scale, whether the backward reaches below the LoRA layers, and
torch.profiler's operator table.

    python bench/profile_train.py --recipe recipes/demo-cpu.yaml --silver /tmp/vista-protocol/silver \
        --stage stage2 --threads 2 --output bench/results/profile_train_amd-epyc-avx2.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--silver", required=True)
    ap.add_argument("--stage", default="stage2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--override", action="append", default=[])
    ap.add_argument("--trl-default", action="store_true",
                    help="TRL's own CPU choice: project every position through the LM head (the 'before')")
    ap.add_argument("--output", default=None)
    a = ap.parse_args()

    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile
    from vista_distill.config import load_recipe
    from vista_distill.runtime.hardware import detect
    from vista_distill.train.run import prepare_stage

    torch.set_num_threads(a.threads)
    out_dir = tempfile.mkdtemp(prefix="profile-train-")
    r = load_recipe(a.recipe, [f"distill.output_dir={a.silver}", f"train.output_dir={out_dir}", *a.override])
    run = prepare_stage(r, a.stage)
    tr, model = run.trainer, run.trainer.model
    if a.trl_default:
        import trl.kernels.chunked_logprob as kernels
        import trl.trainer.utils as tu

        tu._use_triton = kernels._use_triton
    model.train()
    it = iter(tr.get_train_dataloader())
    batches = [next(it) for _ in range(a.steps + 2)]

    # Does the backward reach the frozen layers below the adapters? Count layers whose input gets a grad.
    layers = [m for n, m in model.named_modules() if n.split(".")[-2:-1] == ["layers"]]
    reached: set[int] = set()
    handles = [lay.register_full_backward_hook(lambda m, gi, go, i=i: reached.add(i)) for i, lay in enumerate(layers)]

    def step(b) -> float:
        t = time.perf_counter()
        b = tr._prepare_inputs(b)
        loss = tr.compute_loss(model, b)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t

    step(batches[0])   # warm-up
    for h in handles:
        h.remove()
    times = [step(b) for b in batches[1:1 + a.steps]]
    b = tr._prepare_inputs(batches[1])
    with torch.no_grad():
        t = time.perf_counter()
        model(input_ids=b["input_ids"], attention_mask=b["attention_mask"])
        fwd = time.perf_counter() - t
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(batches[-1])
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    shapes = [list(x["input_ids"].shape) for x in batches[1:1 + a.steps]]
    tokens = [int(x["attention_mask"].sum()) for x in batches[1:1 + a.steps]]
    res = {"cpu": detect("cpu").describe(), "threads": a.threads, "loadavg_start": os.getloadavg()[0],
           "date": time.strftime("%Y-%m-%d %H:%M"), "command": "python bench/profile_train.py " + " ".join(sys.argv[1:]),
           "stage": a.stage, "lm_head_positions": "all (TRL default on CPU)" if a.trl_default else "labelled only",
           "batch_shapes": shapes, "non_pad_tokens": tokens,
           "step_s": [round(x, 2) for x in times], "nograd_forward_s": round(fwd, 2),
           "layers": len(layers), "layers_reached_by_backward": sorted(reached),
           "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    print(json.dumps(res, indent=1))
    print(table)
    if a.output:
        Path(a.output).with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
        Path(a.output).write_text(f"# Training step profile ({a.stage})\n\n```json\n{json.dumps(res, indent=1)}\n```\n\n"
                                  f"```\n{table}\n```\n")


if __name__ == "__main__":
    main()
