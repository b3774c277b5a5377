"""python bench/gpu_decode_step.py --arch qwen3-8b --tokenizer TOKENIZER_DIR --out DIR [--rows 16] [--tokens 128]

Stage 1's decode step on a GPU against the time the card takes to stream the model's weights, for the in-process
student (``TransformersBackend`` with three LoRA adapters, decoding in slots), in three settings on one loaded model:

* ``eager, float32 adapters``: the step as PyTorch runs it op by op, PEFT's adapters in float32 on bf16 weights
  (every LoRA forward casts its input and output);
* ``eager, bf16 adapters``: the adapters cast to the base's dtype (what the backend does on a GPU);
* ``CUDA graphs, bf16 adapters``: the decode step captured once per call and replayed (the backend's default on a GPU);
* ``CUDA graphs, adapter merged``: the stage's adapter added into the bf16 weights (PEFT's ``merge_adapter``) for the
  call, so the step runs no LoRA products: what the adapters' own kernels cost;
* ``CUDA graphs, base model``: no adapter at all, the floor of this decoding path.

Random weights of a real architecture (``train_throughput.ARCHS``): every row decodes to its token budget, so the
steps measure steady decoding. The weights' streaming time is their bytes over the card's read bandwidth, measured
here as a device-to-device copy (bytes read and written over its time). Tokens of each setting are compared with the
first setting's, row by row (bf16 adapters round differently; graphs replay the eager kernels).

CPU smoke test (no graphs): ``--layers 2 --hidden 64 --rows 2 --tokens 8``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpu_random_8b import make_adapters
from train_throughput import random_model

ROOT = Path(__file__).resolve().parents[1]

SYSTEM = ("You split an assistant's turn into atomic claims, one per line, each a short sentence that can be checked "
          "on its own against a reference text.")
TOPICS = ["the Eiffel Tower", "jazz in New Orleans", "the Amazon river", "photosynthesis", "the Roman Empire",
          "Mount Everest", "the printing press", "honey bees", "the Moon landing", "coffee", "the violin",
          "volcanoes", "chess openings", "the Great Barrier Reef", "electric cars", "the Silk Road"]


def read_bandwidth(device: str, gib: float = 2.0) -> float:
    """Bytes/s the card reads in a device-to-device copy (read plus write bytes over its time, the median of 5)."""
    import torch

    n = int(gib * 2**30)
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return 2 * n / sorted(times)[2]


def decode_rows(backend: Any, requests: list[Any], result: dict, path: Path) -> Iterator[dict]:
    """Each setting's decode of ``requests`` (adapter precision, CUDA graphs, merged adapter, base model): its wall
    time per decode step and whether its texts are the first and the previous setting's; ``result`` gains each row
    and is written to ``path`` after each."""
    import torch

    from vista_distill.backends.adapters import adapters_in_dtype

    on_gpu = backend.device.startswith("cuda")
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    settings = [
        ("eager, float32 adapters", torch.float32, False, ""),
        ("eager, bf16 adapters", torch.bfloat16, False, ""),
        ("CUDA graphs, bf16 adapters", torch.bfloat16, True, ""),
        ("CUDA graphs, adapter merged", torch.bfloat16, True, "merged"),
        ("CUDA graphs, base model", torch.bfloat16, True, "base"),
    ]
    first: list[str] | None = None
    previous: list[str] | None = None
    for name, adapter_dtype, graphs, variant in settings:
        if graphs and not on_gpu:
            name += " (eager on a CPU)"
        adapters_in_dtype(backend.model, adapter_dtype)
        backend.cuda_graphs = graphs
        reqs = [dataclasses.replace(r, stage="stage4") for r in requests] if variant == "base" else requests
        if variant == "merged":
            backend.model.set_adapter("stage1")
            backend.model.merge_adapter(["stage1"])
        backend.run(reqs[:2])   # warm-up: kernels, allocator, the prefix cache
        steps0 = backend.stats["decode_steps"]
        sync()
        t = time.perf_counter()
        responses = backend.run(reqs)
        sync()
        wall = time.perf_counter() - t
        if variant == "merged":
            backend.model.unmerge_adapter()
        steps = backend.stats["decode_steps"] - steps0
        texts = [r.text for r in responses]
        first = first or texts
        row = {"setting": name, "wall_s": round(wall, 2), "decode_steps": steps,
               "ms_per_step": round(1e3 * wall / max(steps, 1), 2),
               "generated_tokens": sum(r.completion_tokens for r in responses),
               "same_text_as_first_setting": sum(x == y for x, y in zip(texts, first)),
               "same_text_as_previous_setting": sum(x == y for x, y in zip(texts, previous or texts))}
        previous = texts
        if on_gpu:
            row["over_weights_stream"] = round(row["ms_per_step"] / result["weights_stream_ms"], 2)
            row["peak_cuda_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        result["settings"].append(row)
        path.write_text(json.dumps(result, indent=2) + "\n")
        yield row


def report_lines(result: dict, note: str, rows: int, on_gpu: bool) -> list[str]:
    """The decode-step table in Markdown."""
    a = argparse.Namespace(rows=rows, tokens=result["tokens"])
    lines = [
        f"# Stage 1's decode step, {result['device']}",
        "",
        f"{result['date']}; {note}; torch {result['torch']}; {a.rows} requests decoding {a.tokens} tokens each "
        f"in slots (wall time of the call over its decode steps, the prompt's forward included); weights "
        f"{result['weights_gib']} GiB bf16"
        + (
            f", streamed in {result['weights_stream_ms']} ms at the "
            f"{result['read_bandwidth_tb_s']} TB/s a device copy reads"
            if on_gpu
            else ""
        )
        + f". Command: `{result['command']}`.",
        "",
        (
            "| setting | decode steps | ms / step | x weights' streaming time | texts as the first setting's | "
            "texts as the row above's | peak GiB |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {r['setting']} | {r['decode_steps']} | {r['ms_per_step']} | {r.get('over_weights_stream', '')} | "
              f"{r['same_text_as_first_setting']}/{a.rows} | {r['same_text_as_previous_setting']}/{a.rows} | "
              f"{r.get('peak_cuda_gib', '')} |" for r in result["settings"]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="qwen3-8b")
    ap.add_argument("--recipe", default="recipes/qwen3-8b-lora-80gb.yaml", help="its LoRA settings make the adapters")
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded model's)")
    ap.add_argument("--work", default="/tmp/gpu_decode_step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=16, help="requests decoded at once (the recipes' eval batch)")
    ap.add_argument("--tokens", type=int, default=128, help="tokens each request decodes")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    a = ap.parse_args()

    import torch

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.protocol import Request
    from vista_distill.runtime.hardware import detect

    work, out = Path(a.work), Path(a.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    model_dir, note = random_model(a.arch, work / f"rand-{a.arch}", a.layers, a.hidden, a.tokenizer)
    adapters = work / "adapters"
    if not adapters.exists():
        make_adapters(model_dir, str(ROOT / a.recipe), adapters)
    backend = TransformersBackend(model_dir, adapters=adapters, dtype="bfloat16", batch_size=a.rows)
    on_gpu = backend.device.startswith("cuda")
    requests = [
        Request(
            "stage1",
            (
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Turn: Here is what I know about {TOPICS[i % len(TOPICS)]}."},
            ),
            max_new_tokens=a.tokens,
            stop_on_repeat=True,
        )
        for i in range(a.rows)
    ]
    weight_bytes = sum(p.numel() * p.element_size() for n, p in backend.model.named_parameters() if "lora_" not in n)
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "device": detect(backend.device).describe(),
        "torch": torch.__version__,
        "model": note,
        "rows": a.rows,
        "tokens": a.tokens,
        "weights_gib": round(weight_bytes / 2**30, 2),
        "command": "python bench/gpu_decode_step.py " + " ".join(sys.argv[1:]),
        "settings": [],
    }
    if on_gpu:
        bw = read_bandwidth(backend.device)
        result["read_bandwidth_tb_s"] = round(bw / 1e12, 2)
        result["weights_stream_ms"] = round(1e3 * weight_bytes / bw, 2)
    for row in decode_rows(backend, requests, result, out / "decode_step.json"):
        print(json.dumps(row), flush=True)
    lines = report_lines(result, note, a.rows, on_gpu)
    (out / "decode_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
