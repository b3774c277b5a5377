"""Outputs before and after a refactor: the demo's run folder and the command-line tools on the bundled sample.

Runs the command-line tools (stable across refactors) with fixed seeds and one torch thread, drops what changes from
run to run (wall times, latencies, the load, peak memory, timestamps, temporary paths, versions: report.md's "Speed
and cost" section with them), and files one digest per output:

    git worktree add /tmp/before/vista_distill <old commit>     # a folder named for the package, so that
    python /tmp/before/vista_distill/bench/refactor_identity.py --tag before   # `python -m vista_distill` runs it
    python bench/refactor_identity.py --tag after                              # in this checkout
    python bench/refactor_identity.py --compare before after

Each side runs the demo without its time limits (one thread, a tenth of FaithDial held out, 8 optimizer steps a
stage), so what it computes does not depend on the machine's speed, then digests its silver datasets and records,
each adapter's tensors and fitted heads, the eval records, results.json and report.md. On the bundled sample it runs
``distill`` with the labels teacher (the VISTA human fixture) and with the embedded SmolLM2-135M as a few-shot
teacher (one conversation), ``score`` with the embedded model (one conversation, and two with the world-knowledge
stage), ``train`` of stage 2 for two steps on the labels teacher's silver data, and ``eval`` of the untrained
adapters, the prompted base, the labels teacher, the LLM judge and FActScore with the human claims given.

Writes ``<tag>.json`` (the commit, the machine and one digest per output) under ``--results`` (default
``/tmp/refactor_identity``, shared by both checkouts); ``--compare`` writes ``bench/results/refactor_identity/
comparison.md`` in the checkout it runs from, every digest of both sides, and exits 1 when any output differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(tempfile.gettempdir()) / "refactor_identity"
COMPARISON = ROOT / "bench" / "results" / "refactor_identity" / "comparison.md"
RECIPE = ROOT / "recipes" / "smollm2-135m-cpu.yaml"
DEMO = ROOT / "recipes" / "demo-cpu.yaml"
VISTA_FIXTURE = ROOT / "tests" / "fixtures" / "vista_human" / "dev.json"
SAMPLE = ROOT / "data" / "samples" / "faithdial_wow_sample.jsonl"
DEMO_OVERRIDES = ["eval.max_minutes=null", "train.cpu_threads=1", "eval.threads=1", "data.test_fraction=0.1",
                  *(f"train.per_stage.{s}.max_steps=8" for s in ("stage1", "stage2", "stage3"))]
VOLATILE = {"wall_s", "latency_s", "created", "started", "finished", "timestamp", "time", "calls_per_s",
            "code_version", "git", "python", "torch", "transformers", "peft", "trl", "platform", "hostname",
            "efficiency", "hardware", "environment", "versions", "threads", "elapsed_s", "cpu", "load", "forward_s",
            "turns_per_s", "load_s", "train_runtime_s", "claim_level_wall_s", "seconds", "minutes", "fingerprint"}
MEASURED_SECTIONS = ("## Speed and cost",)
# report.md lines that carry a time, a path or a version
VOLATILE_LINE = re.compile(r"(\d+(\.\d+)? ?(s|min|minutes|seconds)\b|turns/s|/tmp/|commit|version|Python \d)", re.I)


def _cli(*args: str) -> None:
    """``python -m vista_distill ARGS`` on the code of the checkout this script belongs to."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(ROOT.parent)}
    r = subprocess.run([sys.executable, "-m", "vista_distill", *args], cwd=ROOT.parent, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"vista-distill {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")


def volatile(key: str) -> bool:
    """A key whose value changes from run to run: a time (``*_s``, ``*_per_s``), the load, a version, a date."""
    return key in VOLATILE or key.endswith("_s") or key.startswith(("busy_cores", "load_average"))


def normalise(obj: Any, tmp: str) -> Any:
    """``obj`` without the keys that change from run to run, paths made relative, floats to six places."""
    if isinstance(obj, dict):
        return {k: normalise(v, tmp) for k, v in sorted(obj.items()) if not volatile(k)}
    if isinstance(obj, list):
        return [normalise(v, tmp) for v in obj]
    if isinstance(obj, str):
        return obj.replace(tmp, "<tmp>").replace(str(ROOT), "<repo>")
    if isinstance(obj, float):
        return round(obj, 6)
    return obj


def markdown_lines(lines: list[str]) -> list[str]:
    """A report's lines without those that carry a time, a path or a version, and without its measurements of the
    machine (the "Speed and cost" section: wall times, turns per second, peak memory)."""
    out, measured = [], False
    for line in lines:
        if line.startswith("## "):
            measured = line.startswith(MEASURED_SECTIONS)
        if not measured and not VOLATILE_LINE.search(line):
            out.append(line)
    return out


def _load(path: Path) -> Any:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".md":
        return markdown_lines(path.read_text(encoding="utf-8").splitlines())
    return json.loads(path.read_text(encoding="utf-8"))


def _tensors(path: Path) -> dict[str, str]:
    """One sha256 per tensor of a safetensors file."""
    import safetensors.torch

    weights = safetensors.torch.load_file(str(path))
    return {k: hashlib.sha256(v.float().numpy().tobytes()).hexdigest() for k, v in sorted(weights.items())}


def _untrained_adapters(root: Path) -> None:
    """Untrained LoRA adapters (B = 0: the student is the base with the compact prompts)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from vista_distill.backends.model_loading import resolve_model

    torch.manual_seed(0)
    for stage in ("stage1", "stage2", "stage3"):
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(resolve_model(None)),
                               LoraConfig(r=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        model.save_pretrained(root / stage)


def collect_demo(run: Path) -> dict[str, Any]:
    """The demo's outputs in ``run``: silver datasets and records, each adapter's tensors and fitted heads, the eval
    records, results.json and report.md (checkpoints kept for resuming, logs, plots and pages left out)."""
    _cli("demo", "--output-dir", str(run), *DEMO_OVERRIDES)
    from datasets import load_from_disk

    outputs: dict[str, Any] = {}
    silver = run / "silver"
    for name in ("manifest.json", "records.jsonl"):
        outputs[f"demo/silver/{name}"] = _load(silver / name)
    for stage in sorted(p.name for p in silver.iterdir() if (p / "dataset_dict.json").exists()):
        data = load_from_disk(str(silver / stage))
        outputs[f"demo/silver/{stage}"] = {split: data[split].to_list() for split in sorted(data)}
    for stage_dir in sorted(p for p in (run / "checkpoints").iterdir() if p.is_dir()):
        outputs[f"demo/checkpoints/{stage_dir.name}/adapter"] = _tensors(stage_dir / "adapter_model.safetensors")
        for fitted in sorted(stage_dir.glob("*.json")):
            outputs[f"demo/checkpoints/{stage_dir.name}/{fitted.name}"] = _load(fitted)
    for records in sorted((run / "eval" / "records").glob("*.jsonl")):
        outputs[f"demo/eval/records/{records.name}"] = _load(records)
    outputs["demo/eval/results.json"] = _load(run / "eval" / "results.json")
    outputs["demo/eval/report.md"] = _load(run / "eval" / "report.md")
    return outputs


def collect_distill(t: Path) -> dict[str, Any]:
    """``distill`` with the labels teacher and with the embedded model as a few-shot teacher."""
    outputs: dict[str, Any] = {}
    _cli("distill", "--config", str(RECIPE), "--no-progress", "--output-dir", str(t / "silver_labels"),
         f"data.train=[{{benchmark: vista-human, source: {VISTA_FIXTURE}}}]", "data.root=null")
    _cli("distill", "--config", str(DEMO), "--no-progress", "--limit", "1", "--output-dir", str(t / "silver_local"),
         f"data.train=[{{benchmark: file, source: {SAMPLE}}}]", "data.test_fraction=0.0",
         "teacher.max_new_tokens={stage1: 96}")
    for name in ("labels", "local"):
        for part in ("manifest.json", "records.jsonl"):
            outputs[f"distill_{name}/{part}"] = _load(t / f"silver_{name}" / part)
    return outputs


def collect_tools(t: Path) -> dict[str, Any]:
    """``score`` (with and without the world-knowledge stage), ``eval`` and two steps of ``train``."""
    outputs = collect_distill(t)
    _cli("score", "--input", str(SAMPLE), "--output", str(t / "score.jsonl"), "--limit", "1", "--threads", "1",
         "--max-new-tokens", "stage1=96")
    outputs["score/records"] = _load(t / "score.jsonl")
    outputs["score/summary"] = _load(t / "score.summary.json")
    _cli("score", "--input", str(SAMPLE), "--output", str(t / "world.jsonl"), "--limit", "2", "--threads", "1",
         "--max-new-tokens", "stage1=96", "--world-knowledge", "model")
    outputs["score_world/records"] = _load(t / "world.jsonl")
    _untrained_adapters(t / "checkpoints")
    _cli("eval", "--config", str(RECIPE), "--input", str(VISTA_FIXTURE), "--limit", "1", "--no-progress",
         "--systems", "student,base,teacher,llm_judge,factscore", "--output-dir", str(t / "eval"),
         f"train.output_dir={t / 'checkpoints'}", f"distill.output_dir={t / 'silver_local'}", "eval.bootstrap=200",
         "eval.given_claims=true", "eval.threads=1",
         "pipeline.max_new_tokens={llm_judge: 48, factscore_decompose: 64, stage1: 64}")
    outputs["eval/results.json"] = _load(t / "eval" / "results.json")
    _cli("train", "--config", str(RECIPE), "--stage", "stage2", f"distill.output_dir={t / 'silver_labels'}",
         f"train.output_dir={t / 'trained'}", "train.max_steps=2", "train.resume=false")
    outputs["train/stage2_adapter"] = _tensors(t / "trained" / "stage2" / "adapter_model.safetensors")
    return outputs


def digests(outputs: dict[str, Any], tmp: str) -> dict[str, str]:
    """One sha256 per output, over its normalised form."""
    return {key: hashlib.sha256(json.dumps(normalise(markdown_lines(value) if key.endswith(".md") else value, tmp),
                                           sort_keys=True).encode()).hexdigest()
            for key, value in outputs.items()}


def compare(a: dict[str, Any], b: dict[str, Any], tags: tuple[str, str]) -> tuple[str, bool]:
    """The comparison table of two result files, and whether every output is identical."""
    lines = [f"# Outputs {tags[0]} vs {tags[1]}", "",
             "Written by `python bench/refactor_identity.py --compare A B` (its docstring names the runs).", "",
             f"| output | {tags[0]} | {tags[1]} | identical |", "|---|---|---|---|"]
    same = True
    for key in sorted(set(a["digests"]) | set(b["digests"])):
        da, db = a["digests"].get(key), b["digests"].get(key)
        same &= da == db
        lines.append(f"| {key} | `{(da or '-')[:16]}` | `{(db or '-')[:16]}` | {'yes' if da == db else 'NO'} |")
    lines += ["", f"Commits: {a['commit']} -> {b['commit']}. Machine: {a['machine']}, one torch thread (outputs, not "
              "timings, are compared; timings are left out).", "",
              f"Every one of the {len(a['digests'])} outputs identical: {'yes' if same else 'NO'}."]
    return "\n".join(lines) + "\n", same


def _machine() -> str:
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    return f"{model.group(1) if model else platform.processor()}, {os.cpu_count()} core(s)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tag", help="name of the result file to write")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two result files")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where result files go")
    ap.add_argument("--no-demo", action="store_true", help="leave out the demo (the tools on the sample only)")
    ap.add_argument("--keep", action="store_true", help="also keep the normalised outputs (to see what differs)")
    args = ap.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    if args.compare:
        a, b = (json.loads((args.results / f"{tag}.json").read_text(encoding="utf-8")) for tag in args.compare)
        for side in (a, b):   # digested anew where the outputs were kept (today's normalisation)
            if "outputs" in side:
                side["digests"] = digests(side["outputs"], "<tmp>")
        text, same = compare(a, b, tuple(args.compare))
        COMPARISON.parent.mkdir(parents=True, exist_ok=True)
        COMPARISON.write_text(text, encoding="utf-8")
        print(text)
        return 0 if same else 1
    if not args.tag:
        ap.error("--tag or --compare is needed")
    with tempfile.TemporaryDirectory() as tmp:
        outputs = collect_tools(Path(tmp))
        if not args.no_demo:
            outputs |= collect_demo(Path(tmp) / "demo")
        found = digests(outputs, tmp)
        kept_outputs = {k: normalise(v, tmp) for k, v in outputs.items()} if args.keep else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    kept = {"commit": commit, "machine": _machine(), "digests": found,
            **({"outputs": kept_outputs} if kept_outputs is not None else {})}
    (args.results / f"{args.tag}.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
