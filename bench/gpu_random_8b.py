"""python bench/gpu_random_8b.py --arch qwen3-8b --silver runs/demo/silver \\
    --input ../shared/data/vista_human/dev.json --out bench/results/gpu_random_8b

The 7-8B recipes on one GPU, with a randomly initialised model of the real architecture (config only,
no download): training steps of bf16 LoRA and NF4 QLoRA at the recipe's own batch and ``max_length``, and
the student pipeline with three adapters; peak GPU memory and tokens/s beside ``vista-distill check``'s
estimates for the same shapes.

Random weights measure speed and memory only: claims and labels mean nothing (stage 1 decodes to its
token budget). Training runs on two silver sets: ``long``, the silver stage-2 rows with their reference
text lengthened to just under ``train.max_length`` (the shape the recipe's memory estimate assumes), and
``real``, the rows as they are. Each part runs in its own process under a time limit and writes its result
when done, so a part that fails or runs out of time costs only itself. Smoke test on a CPU:
``--layers 2 --hidden 64 --limit 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from train_throughput import random_model

ROOT = Path(__file__).resolve().parents[1]

REFERENCE = "REFERENCE TEXT:\n"


def long_silver(src: Path, dst: Path, tokenizer, max_length: int, rows: int, margin: int = 24) -> dict:
    """Stage-2 silver rows whose reference is lengthened (its own words, cycled) so that the whole chat
    (prompt + completion) is ``max_length - margin`` tokens or a little less; saved as a silver set."""
    from datasets import DatasetDict, load_from_disk

    dd = load_from_disk(str(src / "stage2"))

    def length(prompt: list[dict], completion: list[dict]) -> int:
        return len(tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)["input_ids"])

    def lengthen(row: dict) -> dict:
        user = next(m for m in row["prompt"] if m["role"] == "user")
        head, _, rest = user["content"].partition(REFERENCE)
        ref, sep, tail = rest.partition("\n\n")
        words = ref.split()
        lo, hi = 0, 4 * max_length
        while lo < hi:   # the most words whose chat still fits
            mid = (lo + hi + 1) // 2
            text = " ".join(words[i % len(words)] for i in range(mid))
            msgs = [dict(m, content=head + REFERENCE + text + sep + tail) if m is user else m for m in row["prompt"]]
            if length(msgs, row["completion"]) <= max_length - margin:
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[i % len(words)] for i in range(lo))
        return {"prompt": [dict(m, content=head + REFERENCE + text + sep + tail) if m is user else m
                           for m in row["prompt"]]}

    out = DatasetDict({split: dd[split].select(range(min(n, len(dd[split])))).map(lengthen)
                       for split, n in (("train", rows), ("test", 8))})
    out.save_to_disk(str(dst / "stage2"))
    lens = [length(r["prompt"], r["completion"]) for r in out["train"]]
    return {"rows": len(lens), "tokens_min": min(lens), "tokens_max": max(lens)}


def make_adapters(model_dir: str, recipe: str, dst: Path) -> None:
    """Three LoRA adapters (stage1-3) of the recipe's LoRA settings on the model, PEFT's own initialisation
    with B drawn at random too (so each adapter changes the output, as trained ones do)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vista_distill.config import load_recipe

    lo = load_recipe(recipe).lora
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    tok = AutoTokenizer.from_pretrained(model_dir)
    for i, stage in enumerate(("stage1", "stage2", "stage3")):
        torch.manual_seed(i)
        cfg = LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                         task_type="CAUSAL_LM", init_lora_weights=False)
        peft = get_peft_model(model, cfg)
        with torch.no_grad():   # small B: outputs move, as after training, without blowing up
            for n, p in peft.named_parameters():
                if "lora_B" in n:
                    p.mul_(1e-3)
        peft.save_pretrained(dst / stage)
        tok.save_pretrained(dst / stage)
        model = peft.unload()


def estimates(model_dir: str, recipe: str, tokens_per_step: float | None) -> dict:
    """``vista-distill check``'s training estimate at the recipe's shape and at the measured tokens per step."""
    from vista_distill.check.gpu_memory import Shape, training_estimate
    from vista_distill.config import load_recipe

    r = load_recipe(recipe)
    shape = Shape.from_config(json.loads((Path(model_dir) / "config.json").read_text()))
    t = r.for_stage("stage2").train
    kw = dict(load_in_4bit=r.student.load_in_4bit, r=r.lora.r, targets=r.lora.target_modules,
              checkpointing=t.gradient_checkpointing, optim=str(t.options.get("optim", "")))
    out = {"recipe_shape": [t.per_device_train_batch_size, t.max_length],
           "recipe_gib": round(training_estimate(shape, batch=t.per_device_train_batch_size, length=t.max_length,
                                                 **kw).total, 2)}
    if tokens_per_step:
        length = round(tokens_per_step / (t.per_device_train_batch_size * t.gradient_accumulation_steps))
        out.update(measured_shape=[t.per_device_train_batch_size, length],
                   measured_shape_gib=round(training_estimate(shape, batch=t.per_device_train_batch_size,
                                                              length=length, **kw).total, 2))
    return out


def run(cmd: list[str], limit: float, log: Path) -> bool:
    """One part in its own process group (its children go with it on a timeout); its output goes to
    ``log``; False when it failed or ran out of time."""
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
    print(f"{log.stem}: rc={rc} in {time.perf_counter() - t:.0f} s", flush=True)
    return rc == 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="qwen3-8b")
    ap.add_argument("--recipes", default="recipes/qwen3-8b-lora-80gb.yaml,recipes/qwen3-8b-qlora-24gb.yaml")
    ap.add_argument("--silver", required=True, help="a silver folder (stage2/ is used), e.g. the demo's")
    ap.add_argument("--input", required=True, help="conversations to score")
    ap.add_argument("--limit", type=int, default=6, help="conversations scored")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/gpu_random_8b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded model's)")
    ap.add_argument("--bundle", default=None, help="also keep the whole --out folder as this .tar.gz, rewritten "
                    "after every part (for a machine that returns few files)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--train-override", action="append", default=[],
                    help="recipe override for the training parts (smoke test on a CPU: train.use_cpu=true)")
    ap.add_argument("--part-limit", type=float, default=150.0, help="seconds each part may run")
    ap.add_argument("--parts", default="train-long,score-gold,score,train-real",
                    help="in order, each for every recipe: train-long, train-real, score (the student pipeline), "
                         "score-gold (the input's human claims instead of stage 1), score-fewshot")
    return ap


def _save(summary: dict, out: Path, bundle: str | None) -> None:
    """The summary so far, and the whole folder as ``bundle`` (.tar.gz) when asked."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if bundle:
        with tarfile.open(bundle + ".tmp", "w:gz") as tar:
            tar.add(out, arcname=out.name)
        os.replace(bundle + ".tmp", bundle)


def _train_part(a: argparse.Namespace, kind: str, model_dir: str, silver: Path, out: Path, summary: dict) -> None:
    """bench/train_throughput.py for every recipe on ``silver``, its row and check's estimate in the summary."""
    for recipe in a.recipes.split(","):
        name = f"train_{Path(recipe).stem}_{kind}"
        cmd = [sys.executable, str(ROOT / "bench" / "train_throughput.py"), "--recipe", recipe,
               "--model-dir", model_dir, "--silver", str(silver), "--stage", "stage2", "--steps", str(a.steps),
               "--warmup", "1", "--variant", f"{kind}={';'.join(a.train_override)}".rstrip("="),
               "--output", str(out / f"{name}.md")]
        ok = run(cmd, a.part_limit, out / f"{name}.log")
        row = json.loads((out / f"{name}.json").read_text())[0] if ok and (out / f"{name}.json").exists() else None
        summary["parts"][name] = {"ok": ok, "result": row,
                                  "estimate": estimates(model_dir, recipe, row and row["tokens_per_step"])}
        _save(summary, out, a.bundle)


def _score_part(a: argparse.Namespace, part: str, model_dir: str, work: Path, out: Path, summary: dict) -> None:
    """bench/profile_scorer.py for every recipe (bf16, or NF4 for a QLoRA recipe) with untrained adapters."""
    adapters = work / "adapters"
    if not adapters.exists():
        make_adapters(model_dir, a.recipes.split(",")[0], adapters)
    pipelines = "fewshot" if part == "score-fewshot" else "student"
    gold = part == "score-gold"
    for recipe in a.recipes.split(","):
        q = "qlora" in recipe
        name = f"score_{pipelines}{'_gold' if gold else ''}_{'nf4' if q else 'bf16'}"
        cmd = [sys.executable, str(ROOT / "bench" / "profile_scorer.py"), "--model", model_dir, "--adapters",
               str(adapters), "--input", a.input, "--limit", str(a.limit), "--pipelines", pipelines, "--tag", name,
               "--out", str(out), *(["--load-in-4bit"] if q else []), *(["--claims", "gold"] if gold else [])]
        summary["parts"][name] = {"ok": run(cmd, a.part_limit, out / f"{name}.log")}
        _save(summary, out, a.bundle)


def main() -> None:
    a = _parser().parse_args()

    import torch
    from transformers import AutoTokenizer

    work, out = Path(a.work), Path(a.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__,
                     "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                     "arch": a.arch, "parts": {}}
    t0 = time.perf_counter()
    model_dir = str(work / f"rand-{a.arch}")
    summary["model_note"] = random_model(a.arch, Path(model_dir), a.layers, a.hidden, a.tokenizer)[1]
    summary["model_save_s"] = round(time.perf_counter() - t0, 1)
    print(summary["model_note"], f"saved in {summary['model_save_s']} s", flush=True)
    tok = AutoTokenizer.from_pretrained(model_dir)
    silvers = {"real": Path(a.silver)}
    _save(summary, out, a.bundle)
    for part in a.parts.split(","):
        if part.startswith("train-"):
            kind = part.split("-", 1)[1]
            if kind == "long" and "long" not in silvers:
                from vista_distill.config import load_recipe

                max_length = load_recipe(a.recipes.split(",")[0]).for_stage("stage2").train.max_length
                silvers["long"] = work / "silver-long"
                summary["long_silver"] = long_silver(Path(a.silver), silvers["long"], tok, max_length,
                                                     rows=16 * (a.steps + 1))
            _train_part(a, kind, model_dir, silvers[kind], out, summary)
        elif part.startswith("score"):
            _score_part(a, part, model_dir, work, out, summary)
        print(f"{part} done at {time.perf_counter() - t0:.0f} s", flush=True)
    summary["total_s"] = round(time.perf_counter() - t0, 1)
    _save(summary, out, a.bundle)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
