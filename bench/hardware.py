"""python bench/hardware.py [--threads 1,2] [--dtypes float32,bfloat16] [--out bench/results]

Precision x threads on the machine it runs on: matmul, forward (prefill) and LoRA training-step
throughput of the embedded SmolLM2-135M, plus the embedded GGUF loaded directly vs the cached
dequantized copy. Names the CPU (``lscpu`` model name and flags) in its result files.

Writes ``bench/results/hardware_<cpu>.json`` and ``.md``. Run it with the cores idle (the load average
before and after each measurement is recorded). What ``auto`` picks here is printed beside the
fastest measured precision, so the two can be compared on every kind of CPU.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rows = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        rows[k.strip()] = v.strip()
    return {k: rows[k] for k in ("Model name", "Vendor ID", "CPU(s)", "Flags") if k in rows}


def timed(fn, repeats: int, warmup: bool = True) -> float:
    """Median seconds of ``repeats`` calls, after one warm-up call unless ``warmup`` is False."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def matmul_gflops(dtype, repeats: int) -> float:
    """512x576 @ 576x1536: the shape of SmolLM2-135M's MLP up-projection on a 512-token batch."""
    import torch

    a = torch.randn(512, 576).to(dtype)
    b = torch.randn(576, 1536).to(dtype)
    s = timed(lambda: a @ b, repeats)
    return 2 * 512 * 576 * 1536 / s / 1e9


def forward_tokens_per_s(model, batch: int, length: int, repeats: int, warmup: bool = True) -> float:
    import torch

    ids = torch.randint(100, 40000, (batch, length))
    with torch.inference_mode():
        s = timed(lambda: model(input_ids=ids, use_cache=False), repeats, warmup)
    return batch * length / s


def train_step_s(base, dtype, batch: int, length: int, repeats: int, warmup: bool = True) -> float:
    """One LoRA (r=16, all linear) AdamW step as the trainer runs it: weights in ``dtype``, bf16 autocast
    when ``dtype`` is bf16 (Trainer bf16=True), loss over all tokens."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(copy.deepcopy(base).to(dtype),
                           LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(100, 40000, (batch, length))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()

    return timed(step, repeats, warmup)


def measure_rows(a: argparse.Namespace, threads: list[int], dtypes: list, cap, path) -> list[dict]:
    """Matmul, prefill, decode and a LoRA training step per thread count and precision."""
    import torch
    from transformers import AutoModelForCausalLM

    from vista_distill.runtime import hardware

    pb, pl = (int(x) for x in a.prefill_shape.split("x"))
    tb, tl = (int(x) for x in a.train_shape.split("x"))
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rows = []
    for n in threads:
        torch.set_num_threads(n)
        for dt in dtypes:
            name = str(dt).removeprefix("torch.")
            load0 = hardware.load_average()
            model = copy.deepcopy(base).to(dt) if dt != torch.float32 else base
            emulated = not hardware.choose_dtype(name, cap).native
            reps, treps, warm = ((a.slow_repeats, a.slow_repeats, False) if emulated
                                 else (a.repeats, a.train_repeats, True))
            row = {"dtype": name, "threads": n, "native": not emulated, "load_before": load0,
                   "matmul_gflops": round(matmul_gflops(dt, a.repeats), 2),
                   "prefill_tokens_per_s": round(forward_tokens_per_s(model, pb, pl, reps, warm), 1),
                   "decode_tokens_per_s": round(forward_tokens_per_s(model, 16, 1, a.repeats * 3), 1)}
            del model
            row["train_step_s"] = round(train_step_s(base, dt, tb, tl, treps, warm), 2)
            row["train_tokens_per_s"] = round(tb * tl / row["train_step_s"], 1)
            row["load_after"] = hardware.load_average()
            rows.append(row)
            print(json.dumps(row), flush=True)

    return rows


def measure_gguf(a: argparse.Namespace, threads: list[int], path, pb: int, pl: int) -> list[dict]:
    """The embedded GGUF: transformers' own GGUF load (dequantised on every load) vs the cached copy."""
    import torch
    from transformers import AutoModelForCausalLM, GgufConfig

    from vista_distill.backends.model_loading import embedded_gguf

    torch.set_num_threads(max(threads))
    gguf = embedded_gguf()
    gguf_rows = []
    for label, load in (
        ("GGUF via transformers, packed where a kernel exists (GgufConfig()), float32",
         lambda: AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                      quantization_config=GgufConfig())),
        ("GGUF via transformers, dequantized (GgufConfig(dequantize=True)), float32",
         lambda: AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                      quantization_config=GgufConfig(dequantize=True))),
        ("cached dequantized copy, float32", lambda: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)),
        ("cached dequantized copy, bfloat16", lambda: AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)),
    ):
        t0 = time.perf_counter()
        m = load().eval()
        load_s = time.perf_counter() - t0
        q = getattr(m, "hf_quantizer", None)
        gguf_rows.append({"path": label, "load_s": round(load_s, 2),
                          "packed_modules": len(getattr(q, "packed_modules", {}) or {}),
                          "weights_dtype": str(next(m.parameters()).dtype).removeprefix("torch."),
                          "prefill_tokens_per_s": round(forward_tokens_per_s(m, pb, pl, a.repeats), 1),
                          "threads": max(threads)})
        print(json.dumps(gguf_rows[-1]), flush=True)
        del m
    return gguf_rows


def report_lines(a: argparse.Namespace, info: dict, cap, cores: int, fewshot_stage1_tokens: int) -> list[str]:
    """The markdown report of the result ``info`` (its rows, GGUF rows, fastest rows and prefill bound)."""
    rows, gguf_rows, bound = info["rows"], info["gguf"], info["prefill_bound"]
    best, best_fwd = info["fastest_training"], info["fastest_prefill"]
    flags = " ".join(info["cpu_flags"]) or "none of the listed"
    md = [f"# Precision x threads on {cap.describe()}", "",
          f"`python bench/hardware.py`, {info['date']}; CPU **{info['cpu']}** ({info['lscpu'].get('CPU(s)', '?')} "
          f"CPUs, {cores} usable; matmul-relevant flags: {flags}); torch {info['torch']}, CPU capability "
          f"{cap.cpu_capability}, AMX {cap.cpu_amx_tile}, AVX512-BF16 {cap.cpu_avx512_bf16}. Load average "
          f"{info['load_before']} before, {info['load_after']} after. Model: embedded SmolLM2-135M-Instruct "
          "(dequantized from Q4_1). Medians of "
          f"{a.repeats} runs after a warm-up (training: {a.train_repeats}); precisions this CPU emulates: "
          f"{a.slow_repeats} run(s), no warm-up. Training step: LoRA r=16 on all linear layers, AdamW, weights in "
          "the dtype and bf16 autocast for bf16, as the trainer runs it.", "",
          f"| dtype | native here | threads | matmul GFLOP/s (512x576 @ 576x1536) | prefill tok/s ({a.prefill_shape}) "
          f"| decode tok/s (16 seqs) | LoRA train step s ({a.train_shape}) | train tok/s | load avg before/after |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        md.append(
            f"| {r['dtype']} | {'yes' if r['native'] else 'emulated'} | {r['threads']} | {r['matmul_gflops']} | "
            f"{r['prefill_tokens_per_s']} | {r['decode_tokens_per_s']} | {r['train_step_s']} | "
            f"{r['train_tokens_per_s']} | {r['load_before']} / {r['load_after']} |"
        )
    md += ["", f"Fastest training: **{best['dtype']}, {best['threads']} thread(s)**; fastest prefill: "
           f"**{best_fwd['dtype']}, {best_fwd['threads']} thread(s)**. `auto` picks **{info['auto_dtype']['dtype']}** "
           f"here ({info['auto_dtype']['reason']}).", "",
           "## The embedded GGUF", "",
           f"| load path | load s | packed modules | weights | prefill tok/s ({a.prefill_shape}) |",
           "| --- | ---: | ---: | --- | ---: |"]
    for g in gguf_rows:
        md.append(f"| {g['path']} | {g['load_s']} | {g['packed_modules']} | {g['weights_dtype']} | "
                  f"{g['prefill_tokens_per_s']} |")
    packed = any(g["packed_modules"] for g in gguf_rows)
    md += ["", ("transformers kept GGUF blocks packed here (GGUF matmul kernels from the `kernels` package). "
                if packed else
                "No packed GGUF kernels ran here: transformers computes packed blocks only with the `kernels` "
                "package, which fetches its kernels from the Hugging Face Hub, so it dequantized every weight on "
                "each load. ") +
           "vista-distill loads the cached dequantized copy (`~/.cache/vista-distill/models/`, float32 = the "
           "exact Q4_1 values, converted once) in the precision `auto` picks, for inference and training alike: "
           "compare its load time and prefill speed with the rows above.", "",
           f"Prefill bound: at best {bound['best_prefill_tokens_per_s']} tok/s, a ~{fewshot_stage1_tokens}-token "
           f"few-shot stage-1 prompt takes at least {bound['fewshot_stage1_prompt_s_at_least']} s to read "
           "(the shared few-shot prefix is computed once per stage and reused).", ""]
    return md


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default=None, help="comma list (default: 1 and every usable core count)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-repeats", type=int, default=2)
    ap.add_argument("--prefill-shape", default="2x128", help="batch x tokens of the prefill measurement")
    ap.add_argument("--train-shape", default="1x128", help="batch x tokens of one LoRA training step")
    ap.add_argument("--slow-repeats", type=int, default=1,
                    help="repeats, no warm-up, for precisions the CPU emulates (bf16 on AVX2: ~40x slower)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    import torch

    from vista_distill.backends.model_loading import embedded_model_path
    from vista_distill.runtime import hardware

    cores = hardware.usable_cores()
    threads = [int(t) for t in a.threads.split(",")] if a.threads else sorted({1, cores})
    dtypes = [getattr(torch, d) for d in a.dtypes.split(",")]
    cap = hardware.detect("cpu")
    info = {"lscpu": lscpu(), "cpu": hardware.cpu_model_name(), "cpu_flags": hardware.cpu_flags(),
            "capability": cap.__dict__, "torch": torch.__version__, "usable_cores": cores,
            "auto_dtype": hardware.choose_dtype("auto", cap).__dict__,
            "date": time.strftime("%Y-%m-%d"), "load_before": hardware.load_average()}
    print(f"{cap.describe()}; auto picks {info['auto_dtype']['dtype']}", flush=True)

    pb, pl = (int(x) for x in a.prefill_shape.split("x"))
    path = embedded_model_path()
    rows = measure_rows(a, threads, dtypes, cap, path)
    gguf_rows = measure_gguf(a, threads, path, pb, pl)
    info["load_after"] = hardware.load_average()

    best = max(rows, key=lambda r: r["train_tokens_per_s"])
    best_fwd = max(rows, key=lambda r: r["prefill_tokens_per_s"])
    fewshot_stage1_tokens = 3000  # the few-shot stage-1 prompt is ~3k tokens (bench/results/prompt_tokens.md)
    bound = {"best_prefill_tokens_per_s": best_fwd["prefill_tokens_per_s"],
             "fewshot_stage1_prompt_s_at_least": round(fewshot_stage1_tokens / best_fwd["prefill_tokens_per_s"], 2),
             "note": f"a prompt cannot be read faster than this (prefill {a.prefill_shape}, no KV reuse); the few-shot "
                     "prefix is cached once per stage, so this bounds only the first request and uncached prompts"}
    result = {**info, "rows": rows, "gguf": gguf_rows, "fastest_training": best, "fastest_prefill": best_fwd,
              "prefill_bound": bound}
    label = hardware.short_cpu_label()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"hardware_{label}.json").write_text(json.dumps(result, indent=2) + "\n")

    md = report_lines(a, result, cap, cores, fewshot_stage1_tokens)
    report = out / f"hardware_{label}.md"
    report.write_text("\n".join(md))
    print("wrote", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
