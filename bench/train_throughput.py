"""python bench/train_throughput.py --recipe recipes/smollm2-135m-cpu.yaml --silver runs/smollm2-135m-cpu/silver \
    --variant default --variant bf16-weights=student.dtype=bfloat16 --variant ckpt=train.gradient_checkpointing=true

Training throughput and peak memory of the stage trainer (train/run.py), one fresh process per variant (a variant
is NAME=OVERRIDES, ";" between overrides).

On a GPU, the 7-8B recipes on randomly initialised models of the real architecture (config only, no
download; the embedded tokenizer supplies the ids, and Mistral's 32,768-token vocabulary is enlarged
to the tokenizer's 49,152, +0.13B embedding parameters, which the output notes):

    python bench/train_throughput.py --recipe recipes/qwen3-8b-lora-80gb.yaml --arch qwen3-8b ...
    python bench/train_throughput.py --recipe recipes/qwen3-8b-qlora-24gb.yaml --arch qwen3-8b ...

Measured: tokens/s (non-padding tokens through forward+backward, the first ``--warmup`` steps left
out), examples/s, seconds per step, peak host RSS and peak CUDA memory. Writes a markdown table
(``--output``) and the raw rows as JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Real architectures (from the models' config.json), so a GPU benchmark needs no download.
ARCHS: dict[str, dict] = {
    "qwen3-8b": dict(model_type="qwen3", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=False),
    "llama-3.1-8b": dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=False),
    "mistral-7b": dict(model_type="mistral", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=32768,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-5,
                       sliding_window=None, tie_word_embeddings=False),
}


def random_model(arch: str, folder: Path, layers: int | None, hidden: int | None,
                 tokenizer: str | None = None) -> tuple[str, str]:
    """Save a randomly initialised model of ``arch`` (optionally shrunk) with ``tokenizer`` (a folder; default
    the embedded model's); returns (folder, note on any departure from the real architecture)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(tokenizer or resolve_model(None))
    spec = dict(ARCHS[arch])
    note = f"{arch}: real architecture, random weights"
    if len(tokenizer) > spec["vocab_size"]:
        note = f"{arch}: vocabulary enlarged {spec['vocab_size']} -> {len(tokenizer)} to fit the embedded tokenizer"
        spec["vocab_size"] = len(tokenizer)
    if layers:
        spec["num_hidden_layers"] = layers
    if layers or hidden:
        note += f" (shrunk: layers={layers or spec['num_hidden_layers']}, hidden={hidden or spec['hidden_size']})"
    if hidden:  # smoke tests only
        spec.update(hidden_size=hidden, intermediate_size=hidden * 3, head_dim=hidden // spec["num_attention_heads"])
    model_type = spec.pop("model_type")
    config = AutoConfig.for_model(model_type, **spec)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    return str(folder), note


def run_variant(recipe: str, silver: str, stage: str, overrides: list[str], steps: int, warmup: int,
                model_dir: str | None) -> dict:
    """One measurement, in this process."""
    import torch
    from transformers import TrainerCallback

    from vista_distill.config import load_recipe
    from vista_distill.train import run as sft

    with tempfile.TemporaryDirectory() as tmp:
        extra = [f"train.silver_dir={silver}", f"train.output_dir={tmp}", f"train.max_steps={warmup + steps}",
                 "train.eval_steps=0", "train.save_steps=100000", "train.resume=false", "train.logging_steps=1000"]
        # the stage as the recipe trains it (its per_stage settings), for the measured steps only
        per_stage = load_recipe(recipe, overrides).train.per_stage
        extra += [f"train.per_stage.{stage}.max_steps={warmup + steps}"] if stage in per_stage else \
            ["train.per_stage={}"]
        if model_dir:
            extra.append(f"student.model={model_dir}")
        r = load_recipe(recipe, extra + overrides)
        t0 = time.perf_counter()
        run = sft.prepare_stage(r, stage)
        load_s = time.perf_counter() - t0
        trainer = run.trainer
        marks: list[tuple[float, int]] = []

        class Clock(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                marks.append((time.perf_counter(), trainer.train_tokens))

        trainer.add_callback(Clock())
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t1 = time.perf_counter()
        trainer.train()
        marks.insert(0, (t1, 0))
        (ta, ka), (tb, kb) = marks[warmup], marks[-1]
        return {
            "load_avg_1m": os.getloadavg()[0],
            "tokens_per_s": (kb - ka) / (tb - ta), "s_per_step": (tb - ta) / steps,
            "examples_per_s": steps * r.train.per_device_train_batch_size * r.train.gradient_accumulation_steps
            / (tb - ta),
            "tokens_per_step": (kb - ka) / steps, "load_s": load_s,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "peak_cuda_gb": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
            "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
            "batch": r.train.per_device_train_batch_size, "max_length": r.train.max_length,
            "dtype": r.student.dtype, "bf16": trainer.args.bf16, "load_in_4bit": r.student.load_in_4bit,
            "gradient_checkpointing": r.train.gradient_checkpointing, "lora_dropout": r.lora.dropout,
            "threads": torch.get_num_threads(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu",
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="recipes/smollm2-135m-cpu.yaml")
    ap.add_argument("--silver", default="runs/smollm2-135m-cpu/silver")
    ap.add_argument("--stage", default="stage2")
    ap.add_argument("--steps", type=int, default=6, help="measured steps")
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of the measurement")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME or NAME=override[,override...]; repeatable (default: the recipe as is)")
    ap.add_argument("--arch", choices=sorted(ARCHS), help="random-init model of this architecture (GPU benchmark)")
    ap.add_argument("--model-dir", help="a model saved before (e.g. by --arch in an earlier run): train it")
    ap.add_argument("--layers", type=int, help="with --arch: fewer layers (smoke test)")
    ap.add_argument("--hidden", type=int, help="with --arch: smaller hidden size (smoke test)")
    ap.add_argument("--output", default=None, help="markdown table to write (and .json beside it)")
    ap.add_argument("--_one", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a._one:  # child process: one variant
        job = json.loads(a._one)
        print("RESULT " + json.dumps(run_variant(**job)), flush=True)
        return

    model_dir, note = a.model_dir, (f"model {a.model_dir}" if a.model_dir else "")
    tmp_model = None
    if a.arch and not a.model_dir:
        tmp_model = tempfile.TemporaryDirectory(prefix=f"rand-{a.arch}-")
        model_dir, note = random_model(a.arch, Path(tmp_model.name), a.layers, a.hidden)
        print(note)
    rows = []
    for spec in a.variant or ["recipe"]:
        name, _, ov = spec.partition("=")
        overrides = [o for o in ov.split(";") if o]   # ";" between overrides (lists take ",")
        job = dict(recipe=a.recipe, silver=a.silver, stage=a.stage, overrides=overrides, steps=a.steps,
                   warmup=a.warmup, model_dir=model_dir)
        proc = subprocess.run([sys.executable, __file__, "--_one", json.dumps(job)], capture_output=True, text=True,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        row = {"variant": name, "overrides": overrides, "recipe": a.recipe, "model_note": note,
               **json.loads(line[7:])}
        rows.append(row)
        print(f"{name:28s} {row['tokens_per_s']:8.0f} tok/s  {row['s_per_step']:6.2f} s/step  "
              f"{row['tokens_per_step']:6.0f} tok/step  RSS {row['peak_rss_gb']:.2f} GB"
              + (f"  CUDA {row['peak_cuda_gb']:.1f} GB" if row["peak_cuda_gb"] is not None else ""), flush=True)
    if tmp_model is not None:
        tmp_model.cleanup()
    if a.output and rows:
        out = Path(a.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=2))
        head = ("| variant | overrides | tokens/s | s/step | tokens/step | examples/s | peak RSS GB | peak CUDA GB "
                "| weights | bf16 autocast | 4-bit | grad ckpt | dropout | threads | load avg |")
        lines = [
            f"`{a.recipe}`, stage {a.stage[-1]}" + (f"; {note}" if note else "") + f"; device: {rows[0]['device']}",
            "",
            head,
            "|" + " --- |" * 15,
        ]
        for r in rows:
            cuda = f"{r['peak_cuda_gb']:.1f}" if r["peak_cuda_gb"] is not None else "-"
            lines.append(
                f"| {r['variant']} | {' '.join(r['overrides']) or '-'} | {r['tokens_per_s']:.0f} "
                f"| {r['s_per_step']:.2f} | {r['tokens_per_step']:.0f} | {r['examples_per_s']:.2f} "
                f"| {r['peak_rss_gb']:.2f} | {cuda} | {r['dtype']} | {r['bf16']} | {r['load_in_4bit']} "
                f"| {r['gradient_checkpointing']} | {r['lora_dropout']} | {r['threads']} | {r['load_avg_1m']:.1f} |"
            )
        out.write_text("\n".join(lines) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
