"""python bench/world_protocol.py prepare          # world silver data, the validation split
python bench/world_protocol.py base             # the prompted base (few-shot and compact) on validation
python bench/world_protocol.py variant NAME     # train the world adapter as NAME says, validate
python bench/world_protocol.py seed N           # the chosen variant with train.seed=N, validate
python bench/world_protocol.py fhsumbench       # the student with four adapters on FHSumBench dev, once
python bench/world_protocol.py report           # bench/results/world_protocol/README.md tables

The world stage's protocol (issue 18): choose the world adapter's training on a validation split carved from
its training source, train the choice with three seeds, and touch FHSumBench dev once with the main job's
student carrying the fourth adapter.

Material: ``recipes/demo-cpu.yaml`` with ``pipeline.world.enabled=true``: the human-labels teacher answers the
world stage from Factcheck-GPT's claim factuality (bundled sample, Apache-2.0) for every LACKING EVIDENCE
claim. ``distill.validation_fraction=0.3`` (by dialogue, seed 0) carves the validation split from it; the 10% the
recipe as written keeps back holds 31 claims and no NOT ENOUGH KNOWLEDGE one, too few to choose on. Variants
are judged on validation only, by a criterion fixed before any ran: macro F1 over the three world labels
(TRUE / FALSE / NOT ENOUGH KNOWLEDGE); a variant must beat the recipe as written by more than 0.02 to replace it.

Stages 1-3 of the student are the main job's adapters (``--main-adapters``, default: seed 0 of
``bench/demo_protocol.py``, the same run as ``vista-distill demo``). Runs go to $WORLD_RUNS (default
/tmp/world-protocol); results (small JSON, no FHSumBench text) to bench/results/world_protocol/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import harness

ROOT = Path(__file__).resolve().parents[1]

machine = harness.machine
RECIPE = ROOT / "recipes" / "demo-cpu.yaml"
RUNS = Path(os.environ.get("WORLD_RUNS", "/tmp/world-protocol"))
OUT = ROOT / "bench" / "results" / "world_protocol"
FHSUMBENCH = ROOT.parent / "shared" / "data" / "fhsumbench" / "dev.json"
MAIN_ADAPTERS = Path(os.environ.get("PROTOCOL_RUNS", "/tmp/vista-protocol")) / "seed0" / "checkpoints"
# an earlier FHSumBench eval folder: the judge's and the prompted base's records, reused
EARLIER_EVAL = os.environ.get("FHSUMBENCH_EARLIER_EVAL")
CRITERION_MARGIN = 0.02

# What each variant changes against the recipe as written (fixed before any result was seen).
VARIANTS: dict[str, dict[str, Any]] = {
    "chosen": {"overrides": [], "what": "the recipe as written for the world stage: lr 5e-4, 1 epoch, batch 8, "
                                        "no class balancing"},
    "class-weights": {"overrides": ["train.per_stage.world.class_balance=weights"],
                      "what": "class-weighted loss (TRUE is 60% of the training claims, NOT ENOUGH KNOWLEDGE 8%)"},
    "epochs-3": {"overrides": ["train.per_stage.world.num_train_epochs=3"], "what": "3 epochs"},
}


def recipe(name: str, extra: list[str] | None = None):
    from vista_distill.config import load_recipe

    d = RUNS / name
    return load_recipe(RECIPE, ["pipeline.world.enabled=true", "distill.validation_fraction=0.3",
                                f"distill.output_dir={RUNS / 'silver'}", f"train.output_dir={d / 'checkpoints'}",
                                f"eval.output_dir={d / 'eval'}", *(extra or [])])


def save(name: str, data: dict[str, Any]) -> None:
    harness.save(OUT, name, data)


def validation_rows():
    from vista_distill.train.silver_data import load_silver

    return load_silver(RUNS / "silver", "world")["validation"]


def claim_metrics(gold: list[str], pred: list[str]) -> dict[str, Any]:
    from vista_distill.scoring.metrics import world_claim_metrics

    return world_claim_metrics(gold, pred)


def predict(backend, stage: str, prompts: list[list[dict[str, str]]]) -> list[str]:
    from vista_distill.data.vocabulary import WORLD_LABELS
    from vista_distill.pipeline.protocol import Request

    out = backend.run([Request(stage, tuple(p), labels=tuple(WORLD_LABELS)) for p in prompts])
    return [o.label or "" for o in out]


def step_prepare() -> None:
    from vista_distill.data.material import load_material
    from vista_distill.distill.run import run_distill
    from vista_distill.train.silver_data import load_silver

    r = recipe("chosen")
    run_distill(r, progress=False, material=load_material(r))
    d = load_silver(RUNS / "silver", "world")
    save("prepare", {split: {"claims": len(d[split]), "dialogues": len(set(d[split]["dialogue_id"])),
                             "labels": dict(Counter(d[split]["label"]))} for split in d})


def step_base() -> None:
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.templates import build_messages, get_template

    rows = validation_rows()
    gold = list(rows["label"])
    backend = TransformersBackend(None)
    few = get_template("world", "fewshot")
    out: dict[str, Any] = {"machine": machine()}
    t = time.perf_counter()
    out["base_fewshot"] = claim_metrics(gold, predict(backend, "world",
                                                      [build_messages(few, p[-1]["content"]) for p in rows["prompt"]]))
    out["base_fewshot"]["seconds"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    out["base_compact"] = claim_metrics(gold, predict(backend, "world", [list(p) for p in rows["prompt"]]))
    out["base_compact"]["seconds"] = round(time.perf_counter() - t, 1)
    majority = Counter(list(load_silver_train()["label"])).most_common(1)[0][0]
    out["majority"] = {"label": majority, **claim_metrics(gold, [majority] * len(gold))}
    save("validation_base", out)


def load_silver_train():
    from vista_distill.train.silver_data import load_silver

    return load_silver(RUNS / "silver", "world")["train"]


def train_and_validate(name: str, overrides: list[str]) -> dict[str, Any]:
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.train.run import train_stage

    r = recipe(name, overrides)
    t0 = time.perf_counter()
    s = train_stage(r, "world")
    train_s = time.perf_counter() - t0
    rows = validation_rows()
    backend = TransformersBackend(None, adapters={"world": RUNS / name / "checkpoints" / "world"})
    t1 = time.perf_counter()
    m = claim_metrics(list(rows["label"]), predict(backend, "world", [list(p) for p in rows["prompt"]]))
    return {"machine": machine(), "overrides": overrides, "steps": s["results"]["global_step"],
            "train_loss": s["results"].get("final_train_loss"), "train_s": round(train_s),
            "eval_s": round(time.perf_counter() - t1, 1), "validation": m}


def step_variant(name: str) -> None:
    v = VARIANTS[name]
    save(f"validation_{name}", {"variant": name, "what": v["what"], **train_and_validate(name, v["overrides"])})


def chosen_variant() -> str:
    ref = json.loads((OUT / "validation_chosen.json").read_text())["validation"]["macro_f1"]
    scores = {name: json.loads(p.read_text())["validation"]["macro_f1"] for name in VARIANTS
              if (p := OUT / f"validation_{name}.json").exists()}
    return harness.choose(ref, scores, CRITERION_MARGIN)


def step_seed(seed: int) -> None:
    import shutil

    name = chosen_variant()
    src, dst = RUNS / name / "checkpoints" / "world", RUNS / f"seed{seed}" / "checkpoints" / "world"
    if seed == 0 and src.exists() and not dst.exists():   # the variant's own run is seed 0 (train.seed's default)
        shutil.copytree(src, dst)
    save(f"seed{seed}", {"seed": seed, "variant": name,
                         **train_and_validate(f"seed{seed}", VARIANTS[name]["overrides"] + [f"train.seed={seed}"])})


# ------------------------------------------------------------------------------------------------
# FHSumBench dev, once
# ------------------------------------------------------------------------------------------------

def fhsumbench_sample(per_label: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of ``per_label`` summaries per label (all of a label when it has fewer), by id."""
    rows = json.loads(FHSUMBENCH.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    picked = []
    for label in ("no_hallu", "factual_hallu", "non_factual_hallu"):
        group = [r for r in rows if r["label"] == label]
        picked += rng.sample(group, min(per_label, len(group)))
    return sorted(picked, key=lambda r: r["id"])


def rescore_world(records: list[dict[str, Any]], adapter: Path) -> list[dict[str, Any]]:
    """The world stage again on ``records``' LACKING EVIDENCE claims with another world adapter (stages 1-3 are the
    same adapters, so the same claims and categories): ``scoring.run.rerun_world`` with the compact prompts and
    the model's own knowledge, as the recipe's world stage runs."""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.engine import EngineConfig
    from vista_distill.scoring.run import rerun_world

    return rerun_world(records, EngineConfig(style="compact"), TransformersBackend(None, adapters={"world": adapter}))


def paired_bootstrap(gold: list[str], a: list[str], b: list[str], n: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Three-way turn verdicts' macro F1 of ``a`` minus ``b`` (scoring.significance.paired_bootstrap_macro_f1)."""
    from vista_distill.data.vocabulary import FACTUAL_HALLUCINATION, FAITHFUL, NON_FACTUAL_HALLUCINATION
    from vista_distill.scoring.significance import paired_bootstrap_macro_f1

    return paired_bootstrap_macro_f1(gold, a, b, [FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION],
                                     n_resamples=n, seed=seed)


def step_fhsumbench(per_label: int, sample_seed: int, main_adapters: Path) -> None:
    import tempfile

    from vista_distill.eval.run import EvalProgress, run_eval
    from vista_distill.scoring.metrics import UNKNOWN, world_metrics

    rows = fhsumbench_sample(per_label, sample_seed)
    work = Path(tempfile.mkdtemp(prefix="world-fhsumbench-"))
    subset = work / "fhsumbench" / "dev.json"   # the path names the benchmark for the loader
    subset.parent.mkdir(parents=True)
    subset.write_text(json.dumps(rows))
    ckpt = RUNS / "fhsumbench" / "checkpoints"   # the main job's stages 1-3, seed 0's world adapter
    ckpt.mkdir(parents=True, exist_ok=True)
    for stage in ("stage1", "stage2", "stage3"):
        if not (ckpt / stage).exists():
            (ckpt / stage).symlink_to(main_adapters / stage)
    if not (ckpt / "world").exists():
        (ckpt / "world").symlink_to(RUNS / "seed0" / "checkpoints" / "world")
    r = recipe("fhsumbench", ["eval.given_claims=false", "eval.bootstrap=200", "eval.threads=2"])
    t = time.perf_counter()
    eval_dir = RUNS / "fhsumbench" / "eval"
    res = run_eval(r, input_path=str(subset), systems=["student"], output_dir=eval_dir,
                   progress=EvalProgress(bars=True)).results
    wall = time.perf_counter() - t
    records = [json.loads(x) for x in (eval_dir / "records" / "student.jsonl").read_text().splitlines()]
    scored = [x for x in records if x.get("scored") and x.get("world_gold")]
    gold = [x["world_gold"] for x in scored]
    systems: dict[str, list[str]] = {"student seed 0": [x.get("world_verdict") or UNKNOWN for x in scored]}
    # seeds 1, 2: the world stage again on seed 0's claims; rescoring seed 0 must give its own verdicts back
    check = rescore_world(records, RUNS / "seed0" / "checkpoints" / "world")
    same = sum(a.get("world_verdict") == b.get("world_verdict") for a, b in zip(records, check))
    for seed in (1, 2):
        again = rescore_world(records, RUNS / f"seed{seed}" / "checkpoints" / "world")
        systems[f"student seed {seed}"] = [x.get("world_verdict") or UNKNOWN
                                           for x in again if x.get("scored") and x.get("world_gold")]
    others: dict[str, list[str]] = {}
    if EARLIER_EVAL:   # the earlier run on the same sample: the vanilla judge and VISTA + world few-shot
        for name in ("world_judge", "base"):
            p = Path(EARLIER_EVAL) / "records" / f"{name}.jsonl"
            by_id = {x["conversation_id"]: x for x in map(json.loads, p.read_text().splitlines())}
            others[name] = [by_id[x["conversation_id"]].get("world_verdict") or UNKNOWN for x in scored]
    import numpy as np

    from vista_distill.pipeline.engine import FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION
    from vista_distill.scoring.metrics import FAITHFUL

    labs = [FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION]
    rand = [labs[i] for i in np.random.default_rng(0).integers(0, 3, len(gold))]
    metrics = {name: world_metrics(gold, pred) for name, pred in {**systems, **others, "random": rand}.items()}
    f1s = [metrics[f"student seed {s}"]["macro_f1"] for s in (0, 1, 2)]
    tests = {}
    for s in (0, 1, 2):
        for other, pred in {"random": rand, **others}.items():
            tests[f"student seed {s} vs {other}"] = paired_bootstrap(gold, systems[f"student seed {s}"], pred)
    claims = [c for x in scored for c in x["claims"]]
    save(
        "fhsumbench",
        {
            "machine": machine(),
            "input": "../shared/data/fhsumbench/dev.json",
            "sample": f"{per_label} per label, seed {sample_seed} (seeded per label)",
            "summaries": len(rows),
            "scored": len(scored),
            "wall_s": round(wall, 1),
            "seconds_per_summary": round(res["systems"]["student"]["efficiency"]["wall_s"] / len(rows), 2),
            "claims": len(claims),
            "claims_at_world_stage": sum(c.get("world") is not None for c in claims),
            "world_labels_seed0": dict(Counter((c.get("world") or {}).get("label") for c in claims if c.get("world"))),
            "rescore_check": f"seed 0 rescored: {same} of {len(records)} verdicts as in the eval run",
            "metrics": metrics,
            "student_macro_f1_mean_sd": [round(float(np.mean(f1s)), 4), round(float(np.std(f1s, ddof=1)), 4)],
            "paired_bootstrap": tests,
            "conversation_ids_sha256": res["material"]["conversation_ids_sha256"],
            "main_adapters": str(main_adapters),
        },
    )


def _metrics_row(name: str, what: str, m: dict[str, Any], steps: Any = "", train_s: Any = "") -> str:
    rec = m["recall"]
    return (f"| {name} | {what} | {steps} | {train_s} | {m['macro_f1']:.3f} | {m['accuracy']:.3f} | "
            f"{rec['TRUE']} | {rec['FALSE']} | {rec['NOT ENOUGH KNOWLEDGE']} | {m['predicted']} |")


def _validation_lines(prep: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """The validation table: the base model, the majority label and every variant that ran, then the choice."""
    lines = [
        f"Script: `bench/world_protocol.py`. Machine: {base['machine']['cpu']}; {base['machine']['date'][:10]}.",
        "",
        "## Validation (Factcheck-GPT claim factuality, by dialogue, never FHSumBench)",
        "",
        f"World silver data (the human-labels teacher): train {prep['train']}; "
        f"validation {prep.get('validation', prep.get('test'))}.",
        "",
        "Criterion fixed before any variant ran: macro F1 over TRUE / FALSE / NOT ENOUGH KNOWLEDGE on the "
        f"validation claims; a variant replaces the recipe as written only when better by more than "
        f"{CRITERION_MARGIN}.",
        "",
        "| system | what | steps | train s | macro F1 | accuracy | recall TRUE | recall FALSE | recall NEK "
        "| predicted |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
        _metrics_row("base, few-shot (prompted)", "no adapter, our few-shot world prompt", base["base_fewshot"]),
        _metrics_row("base, compact", "no adapter, the student's prompt", base["base_compact"]),
        _metrics_row("majority label", base["majority"]["label"], base["majority"]),
    ]
    for name, v in VARIANTS.items():
        p = OUT / f"validation_{name}.json"
        if p.exists():
            d = json.loads(p.read_text())
            lines.append(_metrics_row(f"variant {name}", v["what"], d["validation"], d["steps"], d["train_s"]))
    return [*lines, "", f"Chosen by the criterion: **{chosen_variant()}**."]


def _seed_lines() -> list[str]:
    """The chosen variant's three seeds on validation, and their mean and standard deviation."""
    import numpy as np

    lines = ["## The chosen variant with three seeds (validation)", "", "| seed | macro F1 | accuracy | predicted |",
             "| ---: | ---: | ---: | --- |"]
    f1s = []
    for s in (0, 1, 2):
        p = OUT / f"seed{s}.json"
        if p.exists():
            m = json.loads(p.read_text())["validation"]
            f1s.append(m["macro_f1"])
            lines.append(f"| {s} | {m['macro_f1']:.3f} | {m['accuracy']:.3f} | {m['predicted']} |")
    if len(f1s) > 1:
        lines.append(f"| mean ± sd | {np.mean(f1s):.3f} ± {np.std(f1s, ddof=1):.3f} | | |")
    return lines


def _fhsumbench_lines(d: dict[str, Any]) -> list[str]:
    """FHSumBench dev, touched once: every system's metrics, the student's seeds, paired bootstraps, confusions."""
    lines = ["## FHSumBench dev, touched once", "",
             f"{d['sample']}: {d['summaries']} summaries ({d['scored']} scored); the student is the main job's "
             f"stages 1-3 (`vista-distill demo`, seed 0) with the chosen world adapter; seed 0 through "
             f"`vista-distill eval`, seeds 1-2 by running the world stage again on seed 0's claims "
             f"({d['rescore_check']}). {d['claims_at_world_stage']} of {d['claims']} claims reached the world "
             f"stage; {d['seconds_per_summary']} s per summary (2 threads). World labels (seed 0): "
             f"{d['world_labels_seed0']}.", "",
             "| system | macro P | macro R | macro F1 | acc faithful | acc factual | acc non-factual | unknown |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, m in d["metrics"].items():
        lines.append(f"| {name} | {m['macro_precision']:.4f} | {m['macro_recall']:.4f} | {m['macro_f1']:.4f} | "
                     + " | ".join(f"{x:.4f}" for x in m["label_accuracy"].values()) + f" | {m['unknown']} |")
    mean, sd = d["student_macro_f1_mean_sd"]
    lines += ["", f"Student macro F1, 3 seeds: {mean:.4f} ± {sd:.4f}.", "",
              "Paired bootstrap over summaries (macro F1 difference, 95% interval, two-sided p):", "",
              "| comparison | difference | 95% interval | p |", "| --- | ---: | --- | ---: |"]
    for k, t in d["paired_bootstrap"].items():
        lines.append(f"| {k} | {t['diff']:+.4f} | [{t['ci95'][0]:+.4f}, {t['ci95'][1]:+.4f}] | {t['p']:.3f} |")
    lines += ["", *DISCUSSION]
    for name, m in d["metrics"].items():
        c = m["confusion"]
        lines += ["", f"Confusion, {name} (rows gold, columns predicted):", "",
                  "| gold \\ predicted | " + " | ".join(c["columns (predicted)"]) + " |",
                  "| --- |" + " ---: |" * len(c["columns (predicted)"])]
        lines += [f"| {g} | " + " | ".join(map(str, r)) + " |" for g, r in zip(c["rows (gold)"], c["matrix"])]
    return lines


def step_report() -> None:
    lines = ["# The world stage's protocol: choices on validation, 3 seeds, FHSumBench dev once", ""]
    prep = json.loads((OUT / "prepare.json").read_text())
    base = json.loads((OUT / "validation_base.json").read_text())
    lines += [*_validation_lines(prep, base), "", *_seed_lines()]
    p = OUT / "fhsumbench.json"
    if p.exists():
        lines += ["", *_fhsumbench_lines(json.loads(p.read_text()))]
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    print(OUT / "README.md")


DISCUSSION = """## What this shows

* Validation (108 Factcheck-GPT claims, 87 TRUE / 15 FALSE / 6 NOT ENOUGH KNOWLEDGE): the prompted 135M
  base answers FALSE for almost every claim (few-shot 108 of 108), below the majority label; every trained
  variant moves to the TRUE side. By the criterion fixed beforehand, 3 epochs (macro F1 0.336) replaced the
  recipe as written (0.297, TRUE for all 108); class weights reached 0.312 (discarded, kept above). Three
  seeds of the choice: 0.336, 0.341, 0.297. The gain over the majority label is one or two FALSE claims
  recognised: at 135M the world adapter has learnt the label prior of its data, not world knowledge.
* FHSumBench dev (a 120-summary sample, 40 per label, seed 0, touched once per system): the
  student with four adapters reaches macro F1 0.2507 for every seed (each world adapter answered TRUE for
  all 39 claims that reached it), below the seeded random baseline (0.2980) and the vanilla judge on the
  same model (0.3009), above VISTA + world few-shot on the base (0.2127); no difference is significant
  (paired bootstrap, table above). The issue's 135M targets (above random and above the vanilla judge,
  each significant) are not met. The student's stages 1-3 are the main job's: 79 of its 118 claims were
  VERIFIED or another category, so most summaries come out faithful (77 of 120).
* A first run of this step is discarded and kept (`fhsumbench_run1_world-adapter-not-loaded.json`):
  `vista-distill eval`'s student system loaded only the stage 1-3 adapters, so its world stage answered
  on the bare model (FALSE for 38 of 39 claims, macro F1 0.2755). The rescoring check of this script
  (seed 0's world stage run again with its adapter: 83 of 120 verdicts the same) exposed it; the eval
  student (and a served student) now load the world adapter when the recipe runs the stage (a test), and
  the step was run again with nothing else changed: 120 of 120 verdicts reproduced.
* No GPU was lent to this task: the 8B-architecture run of the issue did not happen here.""".splitlines()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("prepare", "base", "variant", "seed", "fhsumbench", "report"))
    ap.add_argument("arg", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--per-label", type=int, default=40)
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--main-adapters", default=str(MAIN_ADAPTERS))
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    if a.step == "prepare":
        step_prepare()
    elif a.step == "base":
        step_base()
    elif a.step == "variant":
        if a.arg not in VARIANTS:
            sys.exit(f"unknown variant {a.arg!r}; expected one of {list(VARIANTS)}")
        step_variant(a.arg)
    elif a.step == "seed":
        step_seed(int(a.arg))
    elif a.step == "fhsumbench":
        step_fhsumbench(a.per_label, a.sample_seed, Path(a.main_adapters))
    else:
        step_report()


if __name__ == "__main__":
    main()
