"""One stage-1 decode step of the scorer's model: how its time grows with the cache columns read, what the
LoRA adapter adds, and whether merging it or ``torch.compile`` (inductor, CPU) makes the step faster.

A static cache of ``--rows`` rows holds a prompt of ``width`` tokens (random ids; the attention reads every
written column, as the slot decoder's widest rows do); then ``--steps`` single-token steps run through the model's
own forward and the median of the last half is kept. Variants: ``eager`` with the stage's adapter (PEFT), ``eager``
with adapters disabled (``nolora``), ``merged`` (the adapter merged into a copy of the weights:
``backends.adapters.MergedStages``, a plain model), and with ``--compile``: ``compiled`` (``torch.compile(
model.forward, dynamic=True)`` on the PEFT model, the mask as wide as the written columns) and ``merged-compiled``
(the merged model compiled with static shapes and inductor's weight freezing, the mask as wide as the cache so no
step recompiles), at the first width, their first call's seconds recorded apart (the compilation, in the first
round). ``--reps`` rounds alternate the variants, the host's pace drifting.

    python bench/decode_step.py --adapters /path/to/demo/checkpoints [--widths 150,450,750] [--compile]

Writes ``bench/results/decode_step_<cpu>.json``. Run it with the cores idle.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import Any

import harness

ROOT = harness.ROOT


def step_ms(model: Any, rows: int, width: int, steps: int, compiled: bool, full_mask: bool = False) -> dict[str, float]:
    """Median milliseconds of a decode step after a ``width``-token prompt, and the first step's seconds;
    ``full_mask``: every step's mask spans the whole cache (its unwritten columns masked), one shape for all."""
    import torch
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=width + steps + 1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 40000, (rows, width), generator=g)
    forward = torch.compile(model.forward, dynamic=not full_mask) if compiled else model.forward
    keys = torch.zeros(rows, width + steps + 1, dtype=torch.bool)
    keys[:, :width] = True
    times = []
    with torch.inference_mode():
        model(input_ids=ids, position_ids=torch.arange(width)[None].expand(rows, -1),
              attention_mask=torch.ones(rows, 1, width, width, dtype=torch.bool).tril(), past_key_values=cache,
              use_cache=True, logits_to_keep=1)
        for write in range(width, width + steps):
            keys[:, write] = True
            mask = keys[:, None, None, :] if full_mask else keys[:, None, None, :write + 1]
            t = time.perf_counter()
            out = forward(input_ids=torch.randint(100, 40000, (rows, 1), generator=g),
                          position_ids=torch.full((rows, 1), write), attention_mask=mask,
                          past_key_values=cache, use_cache=True, logits_to_keep=1)
            out.logits.float()
            times.append(time.perf_counter() - t)
    tail = sorted(times[steps // 2:])
    return {"step_ms": round(1000 * tail[len(tail) // 2], 1), "first_step_s": round(times[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", required=True, help="the student's stage adapters (stage1/ is decoded with)")
    ap.add_argument("--widths", default="150,450,750", help="prompt tokens in the cache before the steps")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2, help="rounds over every variant (the host's pace drifts)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd steps (minutes to compile)")
    a = ap.parse_args()

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.runtime.hardware import short_cpu_label

    import torch._inductor.config as inductor

    backend = TransformersBackend(adapters=a.adapters, threads=a.threads, merge_adapters=False)
    model = backend.model
    model.set_adapter("stage1")
    merged = TransformersBackend(adapters=a.adapters, threads=a.threads, merge_adapters=True).merged
    merged.activate("stage1")
    widths = [int(w) for w in a.widths.split(",")]
    runs = []
    for rep in range(a.reps):
        for width in widths:
            for variant in ("eager", "nolora", "merged") + (("compiled", "merged-compiled")
                                                             if a.compile and width == widths[0] else ()):
                ctx = model.disable_adapter() if variant == "nolora" else contextlib.nullcontext()
                inductor.freezing = variant == "merged-compiled"
                with ctx:
                    r = step_ms(merged.model if variant.startswith("merged") else model, a.rows, width, a.steps,
                                compiled=variant.endswith("compiled"), full_mask=variant == "merged-compiled")
                runs.append({"rep": rep, "width": width, "variant": variant, **r})
                print(json.dumps(runs[-1]), flush=True)
    path = harness.save(ROOT / "bench" / "results", f"decode_step_{short_cpu_label()}", {
        **harness.machine(), "adapters": a.adapters, "dtype": backend.precision.dtype, "rows": a.rows, "commit": harness.commit(),
        "steps": a.steps, "threads": a.threads, "runs": runs})
    print(path)


if __name__ == "__main__":
    main()
