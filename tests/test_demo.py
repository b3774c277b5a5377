"""``vista-distill demo`` end to end, shrunken: the slow test of the suite (no mocks).

The real command in a subprocess, as a user runs it, twice in one folder: the embedded SmolLM2-135M
distils silver data as the few-shot teacher, three LoRA adapters are trained, student/base/teacher
are evaluated on held-out FaithDial dialogues and a report is written. Recipe overrides make it
small: 5 bundled dialogues (3 for the teacher, 2 held out), at most 2 claims per turn, short
generation budgets, 2 training steps per stage at batch size 2, one torch thread.

Measured on the 2-core dev machine with a training job busy on the other core: `pytest tests/test_demo.py`
took 1 min 50 s to 2 min 1 s in three runs (the two demo runs ~1 min 50 s, checks ~6 s); the two demo
runs took ~2.5 min by hand when the machine was busier (load average 3).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vista_distill.data.schema import STAGE2_LABELS, STAGE3_LABELS
from vista_distill.data.vocabulary import STAGES

pytestmark = pytest.mark.slow

SYSTEMS = ("student", "base", "teacher")
PLOTS = ("accuracy.png", "confusion_stage3.png", "calibration.png")
MAX_STEPS = 2
BATCH = 2
# The embedded few-shot teacher (the demo's option to a labels teacher) on 5 FaithDial dialogues.
OVERRIDES = [
    "teacher.backend=transformers",
    "teacher.stage3=score",
    "eval.systems=[student, base, teacher]",
    "eval.given_claims=false",
    "train.per_stage={}",
    "lora.layers_to_transform=null",
    "data.train=[{benchmark: file, source: data/samples/faithdial_wow_sample.jsonl, n: 5}]",
    "data.test_fraction=0.4",                       # 3 dialogues for the teacher, 2 held out
    "pipeline.max_claims=2",
    "teacher.max_new_tokens={stage1: 96, stage3: 48}",
    "pipeline.max_new_tokens={stage1: 96, stage3: 48}",
    f"train.max_steps={MAX_STEPS}",
    f"train.per_device_train_batch_size={BATCH}",
    f"train.save_steps={MAX_STEPS}",                # checkpoint at the last step (recipe: 12 = 2 x 6)
    "train.logging_steps=1",
    "train.cpu_threads=1",
    "eval.threads=1",
    "eval.bootstrap=20",
    "eval.tune_on=[]",                               # the shipped recipe's tuning needs human claims (given_claims)
]


@dataclass
class DemoRuns:
    out: Path
    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    results1: dict[str, Any]         # eval/results.json after the first run
    manifest1: dict[str, Any]        # silver/manifest.json after the first run
    adapters1: dict[str, dict]       # stage -> adapter tensors after the first run
    summaries1: dict[str, dict]      # stage -> training_summary.json after the first run


def _demo(out: Path, cwd: Path) -> subprocess.CompletedProcess:
    """One ``python -m vista_distill demo`` run; fails the test with its output if it fails."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "vista_distill", "demo", "--output-dir", str(out), *OVERRIDES]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"demo exited {proc.returncode}\n{tail}"
    return proc


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _tensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    """The demo run twice into one output folder, with a snapshot taken between the runs."""
    root = tmp_path_factory.mktemp("demo")
    out = root / "run"
    first = _demo(out, root)
    ckpt = out / "checkpoints"
    snapshot = dict(results1=_json(out / "eval" / "results.json"),
                    manifest1=_json(out / "silver" / "manifest.json"),
                    adapters1={s: _tensors(ckpt / s) for s in STAGES},
                    summaries1={s: _json(ckpt / s / "training_summary.json") for s in STAGES})
    second = _demo(out, root)
    return DemoRuns(out, first, second, **snapshot)


def _closing_summary(stdout: str) -> str:
    assert "demo finished in" in stdout, stdout[-3000:]
    return stdout[stdout.rindex("demo finished in"):]


def test_progress_and_closing_summary(demo: DemoRuns) -> None:
    out, stdout, stderr = demo.out, demo.first.stdout, demo.first.stderr
    steps = [int(m) for m in re.findall(r"^\[(\d)/4\] ", stdout, re.M)]
    assert steps == [1, 2, 3, 4]
    assert "3 dialogues for the teacher, 2 held out for evaluation (leak check passed)" in stdout
    both = stdout + stderr
    # live progress: the teacher's request bar, training loss logs, one request bar per evaluated system
    assert re.search(r"^distill\b.* (\d+)/\1 req .*eta.*calls [1-9]\d* \| cache hits 0 \| failures 0", both, re.M)
    for stage in STAGES:   # one bar per stage over its steps, with the training loss
        assert re.search(rf"^train {stage}\b.* {MAX_STEPS}/{MAX_STEPS} steps .*loss \d", both, re.M)
    for name in SYSTEMS:
        assert re.search(rf"^eval {name}\b.* (\d+)/\1 req ", both, re.M)
    for stage in STAGES:
        assert re.search(rf"^\s+{stage}: \d+ steps on [1-9]\d* examples", stdout, re.M)
    summary = _closing_summary(stdout)
    report = out / "eval" / "report.md"
    assert re.search(rf"^report:\s+{re.escape(str(report))}$", summary, re.M)
    assert report.is_file()
    assert re.search(rf"^adapters:\s+{re.escape(str(out / 'checkpoints'))}\s", summary, re.M)
    # the closing tables: turns safe, turns strict, claims, turns/s per system; then the student against each other
    for name in SYSTEMS:
        assert re.search(rf"^\s+{name}\s+\d\.\d{{3}}\s+\d\.\d{{3}}\s+(\d\.\d{{3}}|n/a)\s+\d+\.\d\d\s*$", summary, re.M)
    for other in ("base", "teacher"):
        assert re.search(rf"^\s+turns \(strict\)\s+{other}\s+[+-]\d\.\d{{3}}\s+2\s+\S+\s*$", summary, re.M)
    assert summary.rstrip().splitlines()[-1] == f"report:    {report}"     # the report's path last
    for plot in PLOTS:
        assert str(out / "eval" / plot) in summary
    # a quiet terminal: no library bars or warnings (they are in the log file), the closing summary last
    assert both.count("\n") <= 80, both[-3000:]      # lines; a bar redraws its own line (\r)
    assert "FutureWarning" not in both and "Traceback" not in both and "Tokenizing" not in both
    assert "Loading weights" not in both
    log = out / "demo.log"
    assert re.search(rf"^log:\s+{re.escape(str(log))}$", summary, re.M) and log.stat().st_size > 0
    assert (out / "eval" / "report.html").is_file()
    # no time limit: a full run, every planned step and held-out dialogue, and the summary file says so
    extent = _json(out / "demo_summary.json")
    assert extent["full_run"] is True and extent["cut"] == [] and "cut:" not in summary
    assert extent["steps"] == {s: {"done": MAX_STEPS, "planned": MAX_STEPS} for s in STAGES}
    assert extent["dialogues"] == {"held_out": 2, "whole_pipeline": 2, "claim_level": 2}
    assert extent["budget"] == {"demo_max_minutes": None, "eval_max_minutes": None}


def test_silver_data_has_three_stages(demo: DemoRuns) -> None:
    from datasets import load_from_disk

    silver = demo.out / "silver"
    counts = demo.manifest1["counts"]
    assert demo.manifest1["data"]["train_conversations"] == 3
    assert demo.manifest1["data"]["test_conversations"] == 2
    for stage in STAGES:
        dd = load_from_disk(str(silver / stage))
        assert set(dd) == {"train", "validation"}
        assert len(dd["train"]) == counts[stage]["train"]["examples"] > 0
        assert set(dd["train"]["stage"]) == {stage}
        assert set(dd["train"]["prompt_style"]) == {"compact"}
        assert (silver / stage / "README.md").is_file()
        labels = set(dd["train"]["label"])
        if stage == "stage2":
            assert labels <= set(STAGE2_LABELS)
        elif stage == "stage3":
            assert labels <= set(STAGE3_LABELS)


def test_adapters_exist_are_trained_and_load(demo: DemoRuns) -> None:
    import torch

    from vista_distill.backends.transformers import TransformersBackend

    torch.set_num_threads(1)
    ckpt = demo.out / "checkpoints"
    for stage in STAGES:
        config = _json(ckpt / stage / "adapter_config.json")
        assert config["peft_type"] == "LORA" and config["r"] == 16 and config["lora_alpha"] == 32
        tensors = demo.adapters1[stage]
        lora_b = [t for k, t in tensors.items() if "lora_B" in k]
        assert lora_b and len(lora_b) * 2 == len(tensors)
        assert any(t.abs().sum() > 0 for t in lora_b), f"{stage}: lora_B still at its zero init: not trained"
        summary = demo.summaries1[stage]
        assert summary["results"]["global_step"] == MAX_STEPS and summary["resumed_from"] is None
        assert (ckpt / stage / f"checkpoint-{MAX_STEPS}" / "trainer_state.json").is_file()

    backend = TransformersBackend(adapters=ckpt, dtype="float32", batch_size=1)   # float32: merged stage weights
    model, merged = backend.model, backend.merged
    assert set(backend.adapters) == set(STAGES) and merged is not None and merged.stages == sorted(STAGES)
    ids = backend.tokenizer("The wizard said the Eiffel Tower is in Paris.", return_tensors="pt").input_ids
    merged.activate(None)
    with torch.no_grad():
        base = model(input_ids=ids).logits
    for stage in STAGES:
        merged.activate(stage)
        with torch.no_grad():
            tuned = model(input_ids=ids).logits
        assert not torch.allclose(tuned, base), f"{stage}: the loaded adapter does not change the model"


def test_report_has_all_systems_on_held_out_conversations(demo: DemoRuns) -> None:
    ev = demo.out / "eval"
    assert (ev / "report.md").is_file() and (ev / "results.json").is_file()
    for plot in PLOTS:
        assert (ev / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = demo.results1
    assert results["settings"]["systems"] == list(SYSTEMS)
    material = results["material"]
    assert material["conversations"] == 2
    overlap = material["student_training_overlap"]
    assert overlap["checked_against"] == str(demo.out / "silver" / "records.jsonl")
    assert overlap["test_conversations_in_student_training"] == 0
    report = (ev / "report.md").read_text(encoding="utf-8")
    evaluated: dict[str, set[str]] = {}
    for name in SYSTEMS:
        assert results["systems"][name]["status"] == "ok", results["systems"][name]
        turn = results["metrics"][name]["overall"]["turn"]
        for rule in ("safe", "strict"):
            assert turn[rule]["n_gold"] == material["gold_turns"] > 0
            assert 0.0 <= turn[rule]["coverage"] <= 1.0
            if turn[rule]["n"]:
                assert 0.0 <= turn[rule]["accuracy"] <= 1.0
        assert f"| {name} | ok |" in report
        evaluated[name] = {r["conversation_id"] for r in _jsonl(ev / "records" / f"{name}.jsonl")}
    assert results["systems"]["student"]["description"]["adapters"] == {
        s: str(demo.out / "checkpoints" / s) for s in STAGES}
    assert evaluated["student"] == evaluated["base"] == evaluated["teacher"]
    assert len(evaluated["student"]) == 2

    # the leak check done independently: no evaluated conversation (nor its dialogue) is in the silver data
    from datasets import load_from_disk

    sample = {c["id"]: c for c in _jsonl(Path(__file__).resolve().parents[1] / "data" / "samples"
                                             / "faithdial_wow_sample.jsonl")}
    assert evaluated["student"] <= set(sample)
    silver_records = _jsonl(demo.out / "silver" / "records.jsonl")
    silver_convs = {r["conversation_id"] for r in silver_records}
    silver_dialogues = {r["dialogue_id"] for r in silver_records}
    for stage in STAGES:
        dd = load_from_disk(str(demo.out / "silver" / stage))
        for split in dd.values():
            silver_convs |= set(split["conversation_id"])
            silver_dialogues |= set(split["dialogue_id"])
    assert len(silver_convs) == 3
    assert not evaluated["student"] & silver_convs
    eval_dialogues = {f"{c['source']}:{c['meta']['dialogue_id']}" for i, c in sample.items()
                      if i in evaluated["student"]}
    assert len(eval_dialogues) == 2 and not eval_dialogues & silver_dialogues


def test_second_run_reuses_the_first(demo: DemoRuns) -> None:
    out, stdout = demo.out, demo.second.stdout
    both = stdout + demo.second.stderr
    # distill: every teacher call answered from the call cache, the same silver data exported
    runs = _jsonl(out / "silver" / "runs.jsonl")
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert runs[0]["calls"] == runs[0]["requests"] > 0 and runs[0]["cache_hits"] == 0
    assert runs[1]["calls"] == 0 and runs[1]["cache_hits"] == runs[0]["requests"]
    assert runs[1]["fingerprint"] == runs[0]["fingerprint"] == demo.manifest1["fingerprint"]
    assert _json(out / "silver" / "manifest.json") == demo.manifest1
    assert re.search(rf"^distill\b.*calls 0 \| cache hits {runs[0]['requests']} \|", both, re.M)
    # train: every stage finds its finished run and trains nothing; adapters and summaries unchanged
    for stage in STAGES:
        assert f"[{stage}] already trained ({MAX_STEPS} steps) in {out / 'checkpoints' / stage}" in both
        assert _json(out / "checkpoints" / stage / "training_summary.json") == demo.summaries1[stage]
        after = _tensors(out / "checkpoints" / stage)
        before = demo.adapters1[stage]
        assert after.keys() == before.keys()
        assert all(after[k].equal(before[k]) for k in before), f"{stage}: the adapter changed on the rerun"
    # eval: the teacher answers from the cache filled by the first run; the results are identical
    results2 = _json(out / "eval" / "results.json")
    stats = results2["systems"]["teacher"]["efficiency"]["backend_stats"]
    assert stats["calls"] == 0 and stats["hits"] > 0
    assert results2["systems"]["teacher"]["efficiency"]["cache_hit_share"] == 1.0
    assert "(100% from the call cache)" in _closing_summary(stdout)
    first_stats = demo.results1["systems"]["teacher"]["efficiency"]["backend_stats"]
    assert first_stats["calls"] > 0
    assert results2["fingerprint"] == demo.results1["fingerprint"]
    report = re.escape(str(out / "eval" / "report.md"))
    assert re.search(rf"^report:\s+{report}$", _closing_summary(stdout), re.M)


def test_second_run_trains_no_step_past_max_steps(demo: DemoRuns) -> None:
    ckpt = demo.out / "checkpoints"
    mid_epoch = [s for s in STAGES
                 if MAX_STEPS % math.ceil(demo.summaries1[s]["silver"]["train_examples"] / BATCH) != 0]
    if not mid_epoch:
        pytest.skip("no stage's max_steps ends mid-epoch with this silver data")
    for stage in STAGES:
        assert _json(ckpt / stage / "training_summary.json")["results"]["global_step"] == MAX_STEPS
        assert sorted(p.name for p in (ckpt / stage).glob("checkpoint-*")) == [f"checkpoint-{MAX_STEPS}"]


def test_default_demo_human_labels_teacher_and_claim_level_comparison(tmp_path: Path) -> None:
    """The recipe as shipped (human labels as teacher, bundled FaithDial + its model responses + Factcheck-GPT,
    stage 2 on the FaithDial sources only), shrunk: the summary
    compares student and base at claim level (human claims given) and at turn level, with McNemar p-values."""
    out = tmp_path / "runs" / "demo-cpu"   # no --output-dir: the recipe's own folders, where eval / score look
    small = [
        "data.train=[{benchmark: file, source: data/samples/faithdial_balanced_sample.jsonl, n: 4}, "
        "{benchmark: file, source: data/samples/faithdial_models_train.jsonl, n: 4, hold_out: false}, "
        "{benchmark: factcheck-gpt, source: data/samples/factcheck_gpt, n: 4, hold_out: false, "
        "options: {unit: sentence, evidence: closest}}]",
        "data.test_fraction=0.5",
        "distill.validation_fraction=0",
        "pipeline.max_claims=2",
        "pipeline.max_new_tokens={stage1: 48}",
        "train.per_device_train_batch_size=2",
        "train.per_stage={stage1: {max_steps: 1}, stage2: {max_steps: 1, sources: [FaithDial]}, "
        "stage3: {max_steps: 1}}",
        "train.save_steps=1",
        "train.cpu_threads=1",
        "eval.threads=1",
        "eval.bootstrap=20",
        "eval.round_size=1",
        "eval.tune_on=[{benchmark: file, source: data/samples/faithdial_models_validation.jsonl, n: 6}]",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    # a demo budget spent before evaluation starts: evaluation keeps its minimum, the first held-out dialogue
    proc = subprocess.run([sys.executable, "-m", "vista_distill", "demo", "--max-minutes", "0.01", *small],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    manifest = _json(out / "silver" / "manifest.json")
    assert manifest["teacher"] == "labels"
    assert "distill: teacher the data's human labels (no model runs)" in proc.stdout
    from datasets import load_from_disk

    sources = load_from_disk(str(out / "silver" / "stage2"))["train"]["source"]
    trained = _json(out / "checkpoints" / "stage2" / "training_summary.json")["silver"]["train_examples"]
    faithdial = sum(s.split("+", 1)[0] == "FaithDial" for s in sources)   # with its evidence-contrast rows
    assert "Factcheck-GPT" in sources and "FaithDial+contrast" in sources
    assert 0 < trained <= faithdial   # stage 2: FaithDial only
    summary = _closing_summary(proc.stdout)
    assert re.search(r"^adapters:\s+runs/demo-cpu/checkpoints\s", summary, re.M), summary
    assert all((out / "checkpoints" / s / "adapter_config.json").exists() for s in ("stage1", "stage2", "stage3"))
    assert "let 1 of 2 held-out dialogues run through the whole pipeline on this CPU" in " ".join(summary.split())
    assert "(time budget 0.01 min: evaluation's part of the demo's 0.01 (--max-minutes))" in proc.stdout
    demo_summary = _json(out / "demo_summary.json")
    assert demo_summary["evaluated"]["time_budget"]["conversations_evaluated"] == 1
    assert demo_summary["budget"] == {"demo_max_minutes": 0.01, "eval_max_minutes": 0.01}
    # what ran of what was planned, and the run marked cut: in the summary file and the closing lines
    assert demo_summary["steps"] == {s: {"done": 1, "planned": 1} for s in ("stage1", "stage2", "stage3")}
    assert demo_summary["dialogues"] == {"held_out": 2, "whole_pipeline": 1, "claim_level": 1}
    assert demo_summary["tuned_on"] == {"dev_dialogues": 6, "planned": 6}
    assert demo_summary["full_run"] is False
    assert demo_summary["cut"] == ["1 of 2 held-out dialogues through the whole pipeline",
                                  "1 of 2 held-out dialogues at claim level"]
    assert re.search(r"^cut:\s+a time limit stopped this run short \(1 of 2 held-out", summary, re.M), summary
    # turns safe, turns strict, claims (stage 2), turns/s: the student and the ten-line rules beside it; the base and
    # the pmi rule (eval.claim_level_only) at claim level only
    # (the claims column: fixed, and tuned in brackets for the three with a cut-off, eval.tune_on)
    acc = r"\d\.\d{3}"
    for name in ("student", "overlap", "majority"):
        claims = rf"{acc} \({acc}\)" if name != "majority" else acc
        assert re.search(rf"^\s+{name}\s+{acc}\s+{acc}\s+{claims}\s+\d+\.\d\d\s*$", summary, re.M), summary
    for name in ("base", "pmi"):
        claims = rf"{acc} \({acc}\)" if name == "pmi" else acc
        assert re.search(rf"^\s+{name}\s+-\s+-\s+{claims}\s+claim level only\s*$", summary, re.M), summary
    # the student against each of them, at claim level and (the base and pmi aside) per turn rule
    for other in ("base", "pmi", "overlap", "majority"):
        n_claims = re.search(rf"^\s+claims \(stage 2\)\s+{other}\s+[+-]\d\.\d{{3}}\s+(\d+)\s+[\d.e-]+\s*$", summary,
                             re.M)
        assert n_claims, summary
        turns = re.search(rf"^\s+turns \(strict\)\s+{other}\s+[+-]\d\.\d{{3}}\s+\d+\s+[\d.e-]+\s*$", summary, re.M)
        assert bool(turns) == (other not in ("base", "pmi")), summary
    assert results_base_ran_no_stage1(out)
    results = _json(out / "eval" / "results.json")
    assert "pmi" not in results["metrics"] and results["systems"]["pmi"]["claim_level_wall_s"] > 0
    assert results["settings"]["systems"] == ["student", "base", "pmi", "overlap", "majority"]
    assert (out / "checkpoints" / "pmi_head.json").exists()   # the pmi threshold, fitted on the silver data
    given = _jsonl(out / "eval" / "records" / "student.given_claims.jsonl")
    scored = [r for r in given if r["scored"] and r["gold_claims"]]
    assert scored and all([c["text"] for c in r["claims"]] == [g["text"] for g in r["gold_claims"]] for r in scored)
    assert int(n_claims.group(1)) == sum(len(r["gold_claims"]) for r in scored)
    assert all(r["stage1_raw"] == "" for r in scored)
    pairs = results["given_claims"]["significance"]["stage2"]["overall"]
    assert len(pairs) == 10 and all(0 <= p["pvalue"] <= 1 for p in pairs)   # every pair of the five systems
    report = (out / "eval" / "report.md").read_text(encoding="utf-8")
    assert "## Claim level, human claims given (stages 2 and 3)" in report
    # fixed and tuned: each cut-off chosen on the dev split's human claims, in results.json, report.md and the summary
    tuned = results["tuned"]
    assert set(tuned["systems"]) == {"student", "pmi", "overlap"} and tuned["dev"]["conversations"] == 6
    for name, t in tuned["systems"].items():
        dev = _jsonl(out / "eval" / "records" / f"{name}.tune_on.jsonl")
        assert t["dev_claims"] == sum(len(r["gold_claims"]) for r in dev if r["scored"]) and 0 < t["threshold"] < 1
        assert t["test_claims"] == int(n_claims.group(1)) and 0 <= t["fixed"] <= 1 and 0 <= t["tuned"] <= 1
    assert {p["system_2"] for p in tuned["student_vs_tuned"]} == {"pmi", "overlap"}
    assert "## Stage 2 fixed and tuned (threshold tuned on the dev split)" in report
    assert len(re.findall(r"^\s+claims, both tuned\s+(pmi|overlap)\s", summary, re.M)) == 2, summary
    # evidence dependence, for both systems: in results.json, report.md, the page and the closing summary
    for name in ("student", "base", "overlap"):
        ev = results["systems"][name]["evidence"]
        assert ev["claim_only"]["claims"] == int(n_claims.group(1))   # every human claim with an empty reference
        assert {"deletion_flip_rate", "foreign_reference_auc", "claim_only_accuracy", "edit_flip_rate",
                "strata"} <= set(ev)
        assert (out / "eval" / "records" / f"{name}.evidence.jsonl").exists()
    assert "## Does it read its evidence?" in report
    assert "own vs foreign reference AUC" in (out / "eval" / "report.html").read_text(encoding="utf-8")
    assert "does it read its evidence?" in proc.stdout
    # the closing tables fit a 100-column terminal; the whole output (as many systems and tables as the shipped
    # recipe's) stays within 80 lines, and the two lines that mark this run cut, and the student's turns stage by stage
    tables = summary[summary.index("held-out dialogues: accuracy"):summary.index("report:")]
    assert max(len(line) for line in tables.splitlines()) <= 100, tables
    stages = tables[tables.index("where the student loses its turns"):tables.index("does it read its evidence?")]
    rows = [ln.split()[:2] for ln in stages.splitlines()
            if re.match(r"^\s+(sentence splitter|student|human claims)\s", ln)]
    assert rows == [["sentence", "splitter"], ["student", "student"], ["human", "claims"], ["human", "claims"],
                    ["human", "claims"], ["student", "student"]], tables
    # that table and its progress bar ("eval student, stage by stage") on top of the 82 lines
    assert (proc.stdout + proc.stderr).count("\n") <= 82 + len(stages.splitlines()) + 1, proc.stdout[-3000:]
    material = next(line for line in report.splitlines() if line.startswith("Material:"))
    assert "faithdial_balanced_sample.jsonl" in material and "?" not in material   # the split notes are not sources


def results_base_ran_no_stage1(out: Path) -> bool:
    """The base wrote no whole-pipeline records and decoded no stage-1 list (it ran the claim level only)."""
    results = _json(out / "eval" / "results.json")
    records = out / "eval" / "records" / "base.jsonl"
    stats = results["systems"]["base"]["efficiency"]["backend_stats"]
    return "base" not in results["metrics"] and (not records.exists() or not records.read_text().strip()) \
        and not stats.get("completion_tokens")


def test_a_demo_budget_keeps_evaluations_share_from_training() -> None:
    from vista_distill.demo import EVAL_OVERRUN_MINUTES, EVAL_SHARE, eval_budget, train_budget

    assert train_budget(None, None, 3) is None and train_budget(2.0, None, 3) == 2.0   # no demo budget: the recipe's
    assert train_budget(None, 18.0, 3) == pytest.approx(18.0 * (1 - EVAL_SHARE) / 3)     # training's share per stage
    assert train_budget(1.0, 18.0, 3) == 1.0 and train_budget(None, 0.01, 3) == 0.01   # the recipe's, if lower
    assert eval_budget(10.0, 20.0, 5.5 * 60) == 10.0                    # training left more than the recipe's budget
    left = 20.0 - 7.0 - EVAL_OVERRUN_MINUTES                            # what training left, above evaluation's share
    assert eval_budget(None, 20.0, 7.0 * 60) == pytest.approx(left) and left > 20.0 * EVAL_SHARE
    # a slow CPU whose training overran its share: evaluation keeps its own, never what training spent
    assert eval_budget(None, 20.0, 30 * 60) == pytest.approx(20.0 * EVAL_SHARE)
    assert eval_budget(10.0, 0, 30 * 60) == 10.0 and eval_budget(None, None, 0) is None   # no demo budget
