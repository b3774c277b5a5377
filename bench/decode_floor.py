"""Where a stage-1 decode step's time goes, against what the compute floor credits it, and what int8 weight
products (fbgemm's dynamic int8 linear) would change.

``bench/profile_scorer.py`` credits every decoded token at the FLOP rate of a batched 8 x 256 prefill. This script
measures, on the merged stage-1 model of ``--adapters``, one eager decode step of ``rows`` rows over ``--width``
cached columns (the slot decoder's step: each row at its own columns, a mask as wide as the longest row) and splits
its wall time with torch.profiler into the decoder layers' weight products, the LM head, attention, the other
operators and the host's own time (wall minus operator time). Beside it: what the floor credits the same step (its
FLOPs at the prefill's rate), and what streaming the float32 weights once costs at the memory bandwidth measured
here (a 256 MB sum). Then the same step with every linear layer as fbgemm's dynamic int8 linear, and, on the
stage-1 requests of ``--input``, the seconds and how many lists stay as they are in float32.

    python bench/decode_floor.py --adapters /path/to/demo/checkpoints [--rows 1,8,16,32] [--width 250]

Writes ``bench/results/decode_floor_<cpu>_<date>.json`` and ``.md``. Run it with the cores idle.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from typing import Any

import harness
from hardware import timed

ROOT = harness.ROOT
DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"


def bandwidth_gbs(repeats: int = 5) -> float:
    """GB/s of a sum over 256 MB of float32 (median of ``repeats``)."""
    import torch

    big = torch.ones(64 * 2**20)
    return big.numel() * 4 / timed(big.sum, repeats) / 1e9


def step_call(model: Any, rows: int, width: int) -> Any:
    """A zero-argument decode step of ``rows`` rows whose positions spread below ``width`` (each row's keys at its own
    columns, as ``slot_decoding`` runs them) after a 43-token shared prefix."""
    import torch
    from transformers import DynamicCache
    from vista_distill.backends.slot_decoding import _Columns, _step_mask, row_prefix_cache

    g = torch.Generator().manual_seed(0)
    prefix = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.randint(100, 40000, (1, 43), generator=g), past_key_values=prefix, use_cache=True)
    where = _Columns()
    cache = row_prefix_cache(model.config, prefix, rows, width + 1, where)
    positions = torch.randint(max(width // 2, 44), width, (rows, 1), generator=g)
    positions[0] = width - 1
    ids = torch.randint(100, 40000, (rows, 1), generator=g)
    mask = _step_mask(positions, width)

    def step() -> Any:
        where.at = positions
        with torch.inference_mode():
            return model(input_ids=ids, position_ids=positions, attention_mask=mask, past_key_values=cache,
                         use_cache=True, logits_to_keep=1).logits
    return step


def timed_ms(step: Any, n: int) -> float:
    """Median milliseconds of ``n`` steps after three warm-up steps."""
    for _ in range(2):
        step()
    return 1e3 * timed(step, n)


def anatomy(step: Any, vocab: int, n: int) -> dict[str, float]:
    """Milliseconds a step spends in the layers' weight products, the LM head, attention, other operators and the
    host (wall minus the operators' own time), from torch.profiler over ``n`` steps."""
    from torch.profiler import ProfilerActivity, profile

    parts = {"products_ms": 0.0, "head_ms": 0.0, "attention_ms": 0.0, "other_ops_ms": 0.0}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t = time.perf_counter()
        for _ in range(n):
            step()
        wall = time.perf_counter() - t
    for e in prof.key_averages(group_by_input_shape=True):
        ms = e.self_cpu_time_total / 1e3 / n
        if e.key in ("aten::mm", "aten::addmm"):
            head = any(vocab in shape for shape in (e.input_shapes or []) if isinstance(shape, list))
            parts["head_ms" if head else "products_ms"] += ms
        elif "attention" in e.key:
            parts["attention_ms"] += ms
        else:
            parts["other_ops_ms"] += ms
    parts["host_ms"] = 1e3 * wall / n - sum(parts.values())
    return {k: round(v, 1) for k, v in parts.items()}


def int8_copy(model: Any) -> Any:
    """The model with every linear layer (the LM head too) as fbgemm's dynamic int8 linear."""
    import torch

    q = copy.deepcopy(model)
    q.lm_head.weight = torch.nn.Parameter(q.lm_head.weight.detach().clone())   # untied from the embedding
    return torch.ao.quantization.quantize_dynamic(q, {torch.nn.Linear}, dtype=torch.qint8)


def stage1_lists(scorer: Any, convs: list) -> dict[str, Any]:
    """Stage 1's requests of ``convs`` through the backend in float32, then with the stage-1 weights as int8 linear
    layers: seconds, decode-step seconds and lists equal to float32's."""
    from vista_distill.pipeline.engine import vista_program

    backend = scorer.backend
    requests = [r for c in convs for r in next(vista_program(c, scorer.config))]
    out: dict[str, Any] = {"requests": len(requests)}
    backend.run(requests[:4])
    first = None
    for name in ("float32", "int8"):
        if name == "int8":
            backend.merged.activate("stage1")   # later activations reach the float32 layers the copy replaces
            backend.model = int8_copy(backend.model)
            backend._prefixes.clear()           # prefix caches are computed again, by the int8 layers
            backend.run(requests[:4])
        before, t = dict(backend.stats), time.perf_counter()
        answers = [a.text for a in backend.run(requests)]
        first = first or answers
        out[name] = {"seconds": round(time.perf_counter() - t, 1),
                     "decode_s": round(backend.stats["decode_s"] - before["decode_s"], 1),
                     "lists_as_float32": sum(a == b for a, b in zip(answers, first))}
    return out


def report(out: dict[str, Any]) -> str:
    lines = ["# A stage-1 decode step against the compute floor", "",
             harness.header(out["machine"], f"merged stage-1 model of `{out['adapters']}`, float32, a step over "
                            f"{out['width']} columns. Command: `{out['command']}`."), "",
             (f"Prefill rate (8 x 256, the floor's): {out['prefill_gflop_s']} GFLOP/s. Memory bandwidth (256 MB sum): "
             f"{out['bandwidth_gbs']} GB/s; the float32 weights the step reads ({out['weight_mb']} MB, LM head "
             f"included) stream in {out['weights_stream_ms']} ms."), "",
             ("| rows | step ms | floor credits ms | step / credited | products ms | LM head ms | attention ms | "
             "other ops ms | host ms | int8 step ms |"), "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in out["steps"]:
        lines.append(f"| {r['rows']} | {r['step_ms']} | {r['credited_ms']} | {r['step_over_credited']} | "
                     f"{r['products_ms']} | {r['head_ms']} | {r['attention_ms']} | {r['other_ops_ms']} | "
                     f"{r['host_ms']} | {r['int8_step_ms']} |")
    if "lists" in out:
        ls = out["lists"]
        lines += ["", (f"Stage 1's {ls['requests']} requests of `{out['input']}` through the backend: float32 "
                  f"{ls['float32']['seconds']} s ({ls['float32']['decode_s']} in decode steps); int8 linear layers "
                  f"{ls['int8']['seconds']} s ({ls['int8']['decode_s']}), {ls['int8']['lists_as_float32']} of "
                  f"{ls['requests']} lists as in float32.")]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", required=True, help="the student's stage adapters")
    ap.add_argument("--input", default=str(DEFAULT_INPUT))
    ap.add_argument("--rows", default="1,8,16,32")
    ap.add_argument("--width", type=int, default=250)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-lists", action="store_true", help="skip the stage-1 requests")
    a = ap.parse_args()

    import sys

    from profile_scorer import forward_throughput, model_shape
    from vista_distill.data.io import read_conversations
    from vista_distill.runtime.hardware import short_cpu_label
    from vista_distill.scorer import VistaScorer

    scorer = VistaScorer(adapters=a.adapters, threads=a.threads, batch_size=16)
    backend = scorer.backend
    backend.merged.activate("stage1")
    model, shape = backend.model, model_shape(backend.model)
    m = harness.machine()
    tok_s = forward_throughput(backend, "stage1")
    per_token = shape["linear"] + shape["attention"] * 128.5   # the 8 x 256 forward: a token attends over 128.5 keys
    flop_rate = tok_s * (per_token + shape["head"] / 256)
    weight_bytes = 4 * (shape["linear"] + shape["head"]) / 2
    out: dict[str, Any] = {"machine": m, "commit": harness.commit(), "adapters": a.adapters, "input": a.input,
                           "width": a.width, "command": "python " + " ".join(sys.argv),
                           "prefill_gflop_s": round(flop_rate / 1e9, 1), "bandwidth_gbs": round(bandwidth_gbs(), 1),
                           "weight_mb": round(weight_bytes / 1e6)}
    out["weights_stream_ms"] = round(weight_bytes / out["bandwidth_gbs"] / 1e6, 1)
    quantized = int8_copy(model)
    out["steps"] = []
    for rows in (int(x) for x in a.rows.split(",")):
        step = step_call(model, rows, a.width)
        ms = timed_ms(step, a.steps)
        credited = 1e3 * rows * (shape["linear"] + shape["head"] + shape["attention"] * 0.75 * a.width) / flop_rate
        out["steps"].append({"rows": rows, "step_ms": round(ms, 1), "credited_ms": round(credited, 1),
                             "step_over_credited": round(ms / credited, 2),
                             **anatomy(step, model.config.vocab_size, 10),
                             "int8_step_ms": round(timed_ms(step_call(quantized, rows, a.width), a.steps), 1)})
        print(json.dumps(out["steps"][-1]), flush=True)
    if not a.no_lists:
        out["lists"] = stage1_lists(scorer, read_conversations(a.input))
    name = f"decode_floor_{short_cpu_label()}_{time.strftime('%Y-%m-%d')}"
    harness.save(ROOT / "bench" / "results", name, out)
    (ROOT / "bench" / "results" / f"{name}.md").write_text(report(out))
    print(report(out))


if __name__ == "__main__":
    main()
