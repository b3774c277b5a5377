"""Outputs before and after a refactor: silver data, ``score`` records and eval ``results.json``.

Runs the command-line tools (stable across refactors) on the bundled sample with fixed seeds and one
torch thread, drops what changes from run to run (wall times, latencies, timestamps, temporary paths,
versions of the code itself), and writes one digest per output plus the normalised outputs:

    python bench/refactor_identity.py --tag before      # on the old commit
    python bench/refactor_identity.py --tag after       # on the new one
    python bench/refactor_identity.py --compare before after

    # the demo's own outputs: run the demo on each commit (one thread, no time limits, a tenth of FaithDial
    # held out and 8 steps a stage, so that it takes minutes), then digest its run folder
    vista-distill demo --max-minutes 0 eval.max_minutes=null train.cpu_threads=1 eval.threads=1 \
        data.test_fraction=0.1 train.per_stage.stage1.max_minutes=null train.per_stage.stage2.max_minutes=null \
        train.per_stage.stage3.max_minutes=null train.per_stage.stage1.max_steps=8 \
        train.per_stage.stage2.max_steps=8 train.per_stage.stage3.max_steps=8
    python bench/refactor_identity.py --demo runs/demo-cpu --tag demo-before   # and --tag demo-after
    python bench/refactor_identity.py --compare demo-before demo-after --out demo-comparison.md

Writes ``bench/results/refactor_identity/<tag>.json``; ``--compare`` writes ``comparison.md`` there (or ``--out``)
and exits 1 when any output differs. The demo runs without its time limits, so what it computes does not depend on
the machine's speed: every training step, every test dialogue, the same thread count on both sides.

Runs: distill with the labels teacher (the VISTA human fixture) and with the embedded SmolLM2-135M as
a few-shot teacher (one conversation of the FaithDial sample: stage 1 generated, stages 2-3 scored);
``score`` with the embedded model (one conversation), and again with the world-knowledge stage on (two
conversations); ``train`` of stage 2 for two steps on the labels teacher's silver data (the adapter's weights and
the logged losses); eval with the labels teacher, untrained (identity) student adapters, the prompted base, the LLM
judge and FActScore baselines, with the human claims given and the evidence probes (one conversation); and
``score --server`` against a real vLLM (CPU build, float32) serving the untrained adapters from serve-config's
``vllm.sh`` (two conversations), where the vLLM environment exists (``--no-served`` leaves it out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "refactor_identity"
RECIPE = ROOT / "recipes" / "smollm2-135m-cpu.yaml"
DEMO = ROOT / "recipes" / "demo-cpu.yaml"
VISTA_FIXTURE = ROOT / "tests" / "fixtures" / "vista_human" / "dev.json"
SAMPLE = ROOT / "data" / "samples" / "faithdial_wow_sample.jsonl"
VOLATILE = {"wall_s", "latency_s", "created", "started", "finished", "timestamp", "time", "calls_per_s",
            "code_version", "git", "python", "torch", "transformers", "peft", "trl", "platform", "hostname",
            "efficiency", "hardware", "environment", "versions", "threads", "elapsed_s", "cpu", "load", "forward_s",
            "turns_per_s", "load_s", "train_runtime_s", "claim_level_wall_s", "seconds"}


def _cli(*args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([sys.executable, "-m", "vista_distill", *args], cwd=ROOT.parent, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"vista-distill {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")


def _normalise(obj: Any, tmp: str) -> Any:
    if isinstance(obj, dict):
        return {k: _normalise(v, tmp) for k, v in sorted(obj.items()) if k not in VOLATILE}
    if isinstance(obj, list):
        return [_normalise(v, tmp) for v in obj]
    if isinstance(obj, str):
        return obj.replace(tmp, "<tmp>").replace(str(ROOT), "<repo>")
    if isinstance(obj, float):
        return round(obj, 6)
    return obj


def _load(path: Path) -> Any:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def _resolve_model():
    return _import("vista_distill.backends.model_loading:resolve_model", "vista_distill.backends.models:resolve_model",
                   "vista_distill.models:resolve_model")(None)


def _adapters(root: Path) -> None:
    """Untrained LoRA adapters (B = 0: the student is the base with the compact prompts)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    for stage in ("stage1", "stage2", "stage3"):
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(_resolve_model()),
                               LoraConfig(r=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        model.save_pretrained(root / stage)


def _cpu() -> str:
    """The CPU model and whether it computes bf16 natively (lscpu's flags)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    native = "amx_bf16" in flags or "avx512_bf16" in flags
    return f"{model}, {info.count('processor')} core(s), native bf16: {'yes' if native else 'no'}"


def _import(*paths: str) -> Any:
    """The first of ``module:name`` that imports (modules moved between the commits compared)."""
    import importlib

    for path in paths:
        module, name = path.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {paths}")


def _served_score(t: Path, adapters: Path) -> Any:
    """``score --server`` against vLLM serving ``adapters`` (float32), or None without the vLLM environment."""
    from vista_distill.config import load_recipe

    vllm = _import("vista_distill.testing.vllm_server:VllmServer", "vista_distill.backends.vllm_server:VllmServer")
    python = _import("vista_distill.testing.vllm_server:vllm_cpu_python",
                     "vista_distill.backends.vllm_server:vllm_cpu_python")()
    write = _import("vista_distill.publish.serve_config:write_serve_config",
                    "vista_distill.serve_config:write_serve_config")
    written = write(load_recipe(DEMO), adapters, t / "serve", engines=("vllm",))
    args = ["--dtype", "float32", "--max-model-len", "4096", "--max-num-seqs", "8", "--seed", "0"]
    with vllm(Path(written["out"]) / "vllm.sh", python, extra_args=args, log_path=t / "vllm.log") as server:
        _cli("score", "--config", str(DEMO), "--input", str(SAMPLE), "--output", str(t / "served.jsonl"),
             "--limit", "2", "--server", server.base_url, "--max-new-tokens", "stage1=64")
    return _load(t / "served.jsonl")


def _budgets_key() -> str:
    """Where a recipe keeps the eval systems' token budgets (moved by the refactor)."""
    from vista_distill import config
    return "pipeline.max_new_tokens" if hasattr(config, "PipelineConfig") else "eval.max_new_tokens"


def collect(served: bool = True) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # 1. distill, labels teacher
        silver = t / "silver_labels"
        _cli("distill", "--config", str(RECIPE), "--no-progress", "--output-dir", str(silver),
             f"data.train=[{{benchmark: vista-human, source: {VISTA_FIXTURE}}}]", "data.root=null")
        outputs["distill_labels/manifest"] = _load(silver / "manifest.json")
        outputs["distill_labels/records"] = _load(silver / "records.jsonl")
        # 2. distill, embedded few-shot teacher (generation for stage 1)
        silver = t / "silver_local"
        _cli("distill", "--config", str(DEMO), "--no-progress", "--limit", "1", "--output-dir", str(silver),
             f"data.train=[{{benchmark: file, source: {SAMPLE}}}]", "data.test_fraction=0.0",
             "teacher.max_new_tokens={stage1: 96}")
        outputs["distill_local/manifest"] = _load(silver / "manifest.json")
        outputs["distill_local/records"] = _load(silver / "records.jsonl")
        # 3. score, embedded model
        _cli("score", "--input", str(SAMPLE), "--output", str(t / "score.jsonl"), "--limit", "1",
             "--threads", "1", "--max-new-tokens", "stage1=96")
        outputs["score/records"] = _load(t / "score.jsonl")
        outputs["score/summary"] = _load(t / "score.summary.json")
        # 4. eval
        _adapters(t / "checkpoints")
        _cli("eval", "--config", str(RECIPE), "--input", str(VISTA_FIXTURE), "--limit", "1", "--no-progress",
             "--systems", "student,base,teacher,llm_judge,factscore", "--output-dir", str(t / "eval"),
             f"train.output_dir={t / 'checkpoints'}", f"distill.output_dir={silver}", "eval.bootstrap=200",
             "eval.given_claims=true",
             "eval.threads=1", f"{_budgets_key()}={{llm_judge: 48, factscore_decompose: 64, stage1: 64}}")
        outputs["eval/results"] = _load(t / "eval" / "results.json")
        # 5. score with the world-knowledge stage (the model's own knowledge)
        _cli("score", "--input", str(SAMPLE), "--output", str(t / "world.jsonl"), "--limit", "2", "--threads", "1",
             "--max-new-tokens", "stage1=96", "--world-knowledge", "model")
        outputs["score_world/records"] = _load(t / "world.jsonl")
        # 6. train stage 2 for two steps on the labels teacher's silver data
        ck = t / "trained"
        _cli("train", "--config", str(RECIPE), "--stage", "stage2", f"distill.output_dir={t / 'silver_labels'}",
             f"train.output_dir={ck}", "train.max_steps=2", "train.resume=false")
        import safetensors.torch

        weights = safetensors.torch.load_file(str(ck / "stage2" / "adapter_model.safetensors"))
        outputs["train/stage2_adapter"] = {k: hashlib.sha256(v.float().numpy().tobytes()).hexdigest()
                                           for k, v in sorted(weights.items())}
        # 7. a served student (vLLM, float32), where its environment exists
        if served:
            outputs["served/records"] = _served_score(t, t / "checkpoints")
        return {k: _normalise(v, tmp) for k, v in outputs.items()}


def collect_demo(run: Path) -> dict[str, Any]:
    """A demo run folder's outputs: the silver datasets and records, each adapter's tensors and fitted heads, the
    eval records and results.json. Checkpoints kept for resuming, logs, plots and pages are left out."""
    import safetensors.torch
    from datasets import load_from_disk

    outputs: dict[str, Any] = {}
    silver = run / "silver"
    for name in ("manifest.json", "records.jsonl"):
        outputs[f"silver/{name}"] = _load(silver / name)
    for stage in sorted(p.name for p in silver.iterdir() if (p / "dataset_dict.json").exists()):
        data = load_from_disk(str(silver / stage))
        outputs[f"silver/{stage}"] = {split: data[split].to_list() for split in sorted(data)}
    for stage_dir in sorted(p for p in (run / "checkpoints").iterdir() if p.is_dir()):
        weights = safetensors.torch.load_file(str(stage_dir / "adapter_model.safetensors"))
        outputs[f"checkpoints/{stage_dir.name}/adapter"] = {
            k: hashlib.sha256(v.float().numpy().tobytes()).hexdigest() for k, v in sorted(weights.items())}
        for fitted in sorted(stage_dir.glob("*.json")):
            outputs[f"checkpoints/{stage_dir.name}/{fitted.name}"] = _load(fitted)
    for records in sorted((run / "eval" / "records").glob("*.jsonl")):
        outputs[f"eval/records/{records.name}"] = _load(records)
    outputs["eval/results.json"] = _load(run / "eval" / "results.json")
    return {k: _normalise(v, str(run.parents[1])) for k, v in outputs.items()}   # the clone it ran in


def _digests(outputs: dict[str, Any]) -> dict[str, str]:
    """One sha256 per output, over its normalised form; eval's own fingerprint is left out (it hashes the
    material's absolute paths; the sections it covers are compared themselves)."""
    out = {}
    for key, value in outputs.items():
        value = _normalise(value, "<tmp>")
        if key in ("eval/results", "eval/results.json"):
            value = {k: v for k, v in value.items() if k != "fingerprint"}
        out[key] = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--no-served", action="store_true", help="leave out the vLLM-served student")
    ap.add_argument("--demo", type=Path, metavar="RUN_DIR", help="digest a finished demo run folder instead")
    ap.add_argument("--out", default="comparison.md", help="--compare's file name under the results folder")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.compare:
        a, b = (json.loads((OUT / f"{tag}.json").read_text()) for tag in args.compare)
        for run in (a, b):   # digests anew with today's normalisation (a demo's file holds its digests only)
            if "outputs" in run:
                run["digests"] = _digests(run["outputs"])
        lines = [f"# Outputs {args.compare[0]} vs {args.compare[1]}", "",
                 "Written by `python bench/refactor_identity.py --compare A B` (see its docstring for the runs).", "",
                 "| output | " + " | ".join(args.compare) + " | identical |", "|---|---|---|---|"]
        same = True
        for key in sorted(set(a["digests"]) | set(b["digests"])):
            da, db = a["digests"].get(key), b["digests"].get(key)
            same &= da == db
            lines.append(f"| {key} | `{(da or '-')[:12]}` | `{(db or '-')[:12]}` | {'yes' if da == db else 'NO'} |")
        lines += ["", f"Commits: {a['commit']} -> {b['commit']}. Machine: {_cpu()}, one torch thread (outputs, not "
                  "timings, are compared; timings are left out)."]
        (OUT / args.out).write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0 if same else 1
    outputs = collect_demo(args.demo.resolve()) if args.demo else collect(served=not args.no_served)
    digests = _digests(outputs)
    import vista_distill  # the code that ran (PYTHONPATH may point at another commit's worktree)

    ran_in = args.demo if args.demo else Path(vista_distill.__file__).parent
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ran_in,
                            capture_output=True,
                            text=True).stdout.strip()
    kept = {"commit": commit, "digests": digests} if args.demo else {"commit": commit, "digests": digests,
                                                                      "outputs": outputs}   # a demo's are too large
    (OUT / f"{args.tag}.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    print(json.dumps(digests, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
