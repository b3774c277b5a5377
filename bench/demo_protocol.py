"""python bench/demo_protocol.py prepare            # silver data, validation conversations
python bench/demo_protocol.py base               # the prompted base on validation (once)
python bench/demo_protocol.py variant NAME       # one variant: train what it changes, validate
python bench/demo_protocol.py seed N             # the chosen recipe with train.seed=N: train, test once
python bench/demo_protocol.py vista-dev          # seed 0's adapters and the base on vista_human/dev.json
python bench/demo_protocol.py val-models NAME [ADAPTER]   # stage 2 alone on the 200 validation responses
python bench/demo_protocol.py val-turns NAME [SET]   # the whole pipeline on a validation set (SET: models, the 200
                                                 # FaithDial responses, or begin-fade) of a VAL_VARIANTS entry
                                                 # (trained first unless done) or ``base``
python bench/demo_protocol.py ref-swap NAME [ADAPTER]   # stage 2 on the 200 responses against own vs foreign snippets
python bench/demo_protocol.py val-claims NAME    # stages 2-3 of a variant on the 300 validation turns' human claims
python bench/demo_protocol.py val-evidence NAME  # stage 2 of a variant (or base) on the 200 responses with the
                                                 # evidence probes (scoring/evidence.py)
python bench/demo_protocol.py seed-claims TAG    # the test's human claims once at claim level with the evidence
                                                 # probes: base, demo ($DEMO_ADAPTERS) or a seed (stage 2 trained)
python bench/demo_protocol.py claim-pairs        # each seed-claims student against the base: McNemar
python bench/demo_protocol.py pairs              # every seed's student against the base on the test: McNemar
python bench/demo_protocol.py report             # validation_table.md and the test tables, from the result files

The main job's protocol: choose its training settings on a validation split, train the choice with three
seeds, evaluate on the held-out test material once, and score the VISTA human dev set.

Material: ``recipes/demo-cpu.yaml`` (bundled FaithDial + Factcheck-GPT, human labels as teacher). Its
``data.test_fraction`` holds out the FaithDial test dialogues; of the rest, ``distill.validation_fraction`` of
the dialogues is the validation split (the silver ``test`` split), and its FaithDial dialogues are the
validation turns. Variants are judged on validation only:

* claim level: stages 2-3 on the validation dialogues' human claims (stage-2 accuracy, the criterion
  fixed before any variant ran: highest stage-2 accuracy; ties within one claim go to the simpler variant);
* turn level: the whole student pipeline on the validation dialogues (strict and safe rules).

Runs go to $PROTOCOL_RUNS (default /tmp/vista-protocol); results (small JSON) to
bench/results/demo_protocol/. ``PROTOCOL_REUSE=1``: ``val-turns`` evaluates a variant's adapters already trained
there instead of training them again. Every run evaluates all of its material (``eval.max_minutes`` off).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import harness

from vista_distill.runtime.numbers import percent as _pct

ROOT = Path(__file__).resolve().parents[1]

RECIPE = ROOT / "recipes" / "demo-cpu.yaml"
RUNS = Path(os.environ.get("PROTOCOL_RUNS", "/tmp/vista-protocol"))
OUT = ROOT / "bench" / "results" / "demo_protocol"

# What each variant changes against the recipe as written ("chosen" before any result was seen).
# ``stages``: the adapters it trains itself; the others are the "chosen" variant's.
VARIANTS: dict[str, dict[str, Any]] = {
    "chosen": {
        "overrides": [],
        "stages": ["stage1", "stage2", "stage3"],
        "what": "recipes/demo-cpu.yaml as written: lr 5e-4, no class balancing, FaithDial + Factcheck-GPT",
    },
    "class-weights": {
        "overrides": ["train.per_stage.stage2.class_balance=weights", "train.per_stage.stage3.class_balance=weights"],
        "stages": ["stage2", "stage3"],
        "what": "class-weighted loss in stages 2 and 3",
    },
    "lr-1e-3": {
        "overrides": ["train.per_stage.stage2.learning_rate=0.001"],
        "stages": ["stage2"],
        "what": "stage 2 learning rate 1e-3",
    },
    "augment": {
        "overrides": ["distill.augment_falsified=2"],
        "stages": ["stage2", "stage3"],
        "silver": "own",
        "what": "plus rule-made VERIFIED/CONTRADICTED pairs (LLM-OASIS style, 2 per reference)",
    },
    # added 2026-11-24 after the CPU training step became 2.3x faster (train/trainer.py: the fused LM head on
    # labelled positions only): the same training wall time buys 2.5x the steps
    "steps-2.5x": {
        "overrides": [
            "train.per_stage.stage1.max_steps=20",
            "train.per_stage.stage2.max_steps=40",
            "train.per_stage.stage3.max_steps=10",
        ],
        "stages": ["stage1", "stage2", "stage3"],
        "what": "2.5x the steps per stage (20 / 40 / 10), about the old training time at the faster step",
    },
    "stage2-48": {
        "overrides": ["train.per_stage.stage2.max_steps=48"],
        "stages": ["stage2"],
        "what": "stage 2 only, 3x its steps (48 = 384 examples, about half an epoch of its 829); "
        "stages 1 and 3 as the recipe",
    },
    "faithdial-only": {
        "overrides": [],
        "stages": ["stage2"],
        "silver": "faithdial",
        "what": "stage 2 trained on the FaithDial examples only (no Factcheck-GPT)",
    },
}


# 2026-11-24: variants judged on the whole pipeline over FaithDial's 200 validation model
# responses (``val-turns``). Criterion fixed before any of them ran: turn accuracy under the strict rule over all
# 200 responses (an unknown verdict counts as wrong); within one point (2 responses) the recipe as written stays.
# ``stages``: what the variant trains itself (the others link to the ``recipe`` run's adapters); ``options``:
# loader options set on the recipe's data.train entries (by index), which distils its own silver data.
VAL_VARIANTS: dict[str, dict[str, Any]] = {
    "recipe": {"overrides": [], "stages": ["stage1", "stage2", "stage3"], "what": "recipes/demo-cpu.yaml as written"},
    "questions": {
        "overrides": [],
        "stages": ["stage1"],
        "options": {2: {"questions": 0.5}},
        "what": "stage 1 also on half the Factcheck-GPT sentences rephrased as 'Did you know that ...?' "
        "questions (same claims)",
    },
    # added before any val-turns result was seen: the demo's stage 1 (8 steps of 8) answers free text, not a
    # numbered claim list, on the test records read while measuring the Intel run (nothing chosen there)
    "stage1-24": {
        "overrides": ["train.per_stage.stage1.max_steps=24"],
        "stages": ["stage1"],
        "what": "stage 1 trained 3x longer (24 steps of 8)",
    },
    "questions-24": {
        "overrides": ["train.per_stage.stage1.max_steps=24"],
        "stages": ["stage1"],
        "options": {2: {"questions": 0.5}},
        "what": "both: questions and 24 stage-1 steps",
    },
    # added after recipe / questions / base had run (stage 1 invents claims unrelated to the turn at 8 steps),
    # before any result of the longer stage 1 was seen
    "stage1-64": {
        "overrides": ["train.per_stage.stage1.max_steps=64"],
        "stages": ["stage1"],
        "what": "stage 1 trained 8x longer (64 steps of 8, about 2 epochs of its 262 examples)",
    },
    # 2026-11-24: generalisation beyond FaithDial (issue 13 item 5; the human set mixes AIS, BEGIN, FADE and FaithDial).
    # BEGIN-WoW (CC BY 4.0) and FADE (MIT) bundled in data/samples (begin.py / fade.py build_sample in
    # data/benchmarks/), each response its one claim, as training-only sources of stages 2 and 3; stage 1 is
    # stage1-64's. Criterion, fixed before any of these ran: strict-rule turn accuracy over all validation turns pooled
    # (FaithDial's 200 model responses + BEGIN's 60 + FADE's 40 validation rows, ``val-turns NAME begin-fade`` for the
    # last two; an unknown verdict counts as wrong); within one point stage1-64 (the recipe as written) stays.
    "mix": {
        "overrides": ["train.per_stage.stage2.sources=[FaithDial,BEGIN,FADE]"],
        "stages": ["stage2", "stage3"],
        "add_sources": "begin-fade",
        "links": "val-stage1-64",
        "what": "stages 2-3 also on BEGIN-WoW (290) and FADE (120 rows) training responses, 48 stage-2 steps",
    },
    "mix-96": {
        "overrides": ["train.per_stage.stage2.sources=[FaithDial,BEGIN,FADE]", "train.per_stage.stage2.max_steps=96"],
        "stages": ["stage2", "stage3"],
        "add_sources": "begin-fade",
        "links": "val-stage1-64",
        "what": "as mix, 96 stage-2 steps (the added data doubles stage 2's examples)",
    },
    # added after mix-96 was chosen, as an ablation only (the choice stands as made): how much of mix-96's gain is
    # the 96 steps and how much the data
    "faithdial-96": {
        "overrides": ["train.per_stage.stage2.max_steps=96", "train.per_stage.stage2.sources=[FaithDial]"],
        "stages": ["stage2", "stage3"],
        "links": "val-stage1-64",
        "what": "the recipe before mix: stage 2 on FaithDial sources, 96 steps",
    },
    # 2026-11-24: the held-out test enlarged to half the FaithDial dialogues (data.test_fraction 0.5) and split so that
    # no test reference is trained on (data.split_by reference; 134 turns; 15 of the old 27 shared a knowledge snippet
    # with a training response), before anything ran on it, so its training material shrank and the choice between the
    # two best rows above is made again on that material. Criterion, fixed before either ran: pooled strict-rule turn
    # accuracy over the 300 validation turns (as for mix); within one point the recipe as written (split50, i.e. mix-96)
    # stays. Runs go to a fresh $PROTOCOL_RUNS (its own silver data, made by ``prepare``).
    "split50": {
        "overrides": [],
        "stages": ["stage1", "stage2", "stage3"],
        "what": "recipes/demo-cpu.yaml as written (mix-96) with the test at half the FaithDial dialogues",
    },
    "split50-faithdial-96": {
        "overrides": ["train.per_stage.stage2.sources=[FaithDial]"],
        "stages": ["stage2", "stage3"],
        "links": "val-split50",
        "what": "split50 with stage 2 on the FaithDial sources only (faithdial-96 on the new split)",
    },
    # 2026-11-25. Read on validation records (val-split50, the 200 FaithDial model responses): the
    # student's stage 1 leaves out a response's opinions and personal remarks ("It's hard to not get into them when
    # you love the original. The adventures continued in six feature films." -> only the film claim), which FaithDial
    # labels hallucinated, so under the strict rule 42 of 100 hallucinated turns passed as faithful (given claims: 23).
    # Factcheck-GPT's annotators wrote no claims for such sentences; ``unclaimed: out_of_scope`` gives each its one
    # OUT-OF-SCOPE claim (34 sentences), so stage 1 sees complete decompositions that keep them. Criterion fixed before
    # it ran: pooled strict over the 300 validation turns; within one point the recipe as written (split50) stays.
    "split50-oos": {
        "overrides": [],
        "stages": ["stage1", "stage3"],
        "options": {2: {"unclaimed": "out_of_scope"}},
        "links": "val-split50",
        "what": "split50 with Factcheck-GPT's undecomposed (opinion, remark) sentences as one OUT-OF-SCOPE "
        "claim each: stage 1 and 3 trained again, stage 2 the recipe's",
    },
    # Then (split50-oos discarded: pooled strict 57.7): the recipe's stage 2 (val-split50), given the 200 validation
    # responses' claims against a random other validation response's snippet instead of their own, still said
    # VERIFIED to 47 of the 100 faithful ones (64 with their own snippet) and to 21 of the 100 hallucinated (24): it
    # barely reads the reference. ``distill.augment_swapped`` (distill/augment.py) gives half of the training
    # VERIFIED claims a second, UNVERIFIABLE example against another training dialogue's reference. Share 0.5 fixed
    # before it ran (1.0 would make two thirds of stage 2's examples UNVERIFIABLE); same criterion as above.
    "split50-swap": {
        "overrides": [
            "distill.augment_swapped=0.5",
            ("train.per_stage.stage2.sources=[FaithDial,BEGIN,FADE,FaithDial+swapped,BEGIN+swapped,FADE+swapped]"),
        ],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "split50 with half of stage 2's VERIFIED claims also given, UNVERIFIABLE, another "
        "training dialogue's reference: stage 2 trained again, stages 1 and 3 the recipe's",
    },
    # split50-swap collapsed onto UNVERIFIABLE (pooled strict 49.3; 8 of 100 faithful responses VERIFIED), but
    # ``ref-swap`` found it ranking a faithful claim's own snippet above a foreign one more often than the recipe's
    # stage 2 (AUC 0.59 vs 0.535): the added examples moved the prior more than the reading. Next, declared before
    # it ran: every VERIFIED claim paired (share 1.0, as LLM-OASIS keeps both claims of a pair) and stage 2's loss
    # weighted by class so that the prior stays even. Same criterion.
    "split50-swap-weighted": {
        "overrides": ["distill.augment_swapped=1.0", "train.per_stage.stage2.class_balance=weights"],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "split50 with every stage-2 VERIFIED claim also given, UNVERIFIABLE, another "
        "training dialogue's reference, and stage 2's loss weighted by class",
    },
    # 2026-11-25 (issue 31: students that read their evidence), on a 2-core AMD EPYC with
    # AVX512-BF16 (bf16). ``val-evidence NAME`` trains the variant's stage 2 (its own silver data) and measures
    # stage 2 on the 200 FaithDial validation responses' claims with the evidence probes (scoring/evidence.py).
    # Criterion, fixed before any of these ran: the mean of the own-vs-foreign reference AUC and the deletion flip
    # rate (the two bars, 0.75 and 0.6), among variants whose stage-2 accuracy on the 200 is at least the
    # recipe's 70.0 (split50's given-claims accuracy on them, Intel bf16) less 3 points; within 0.02
    # the simpler variant (fewer changes) wins.
    "contrast": {
        "overrides": ["distill.evidence_contrast=0.5"],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "split50 with evidence-contrast rows (deletion, edit, insertion) for half of the training "
        "claims, prior kept: stage 2 trained again (96 steps, top 8 layers)",
    },
    # ran first: its training was stopped by the recipe's 5-minute stage-2 limit at 49 of 96 steps (unit tests ran
    # beside it); AUC 0.527, flip rate 0.057: no reading. Then, declared before it ran, with the stage time limit
    # off and a fourth kind (``foreign``: VERIFIED claims whose support cannot be placed in a few sentences, most of
    # them one-sentence snippets, against another training reference), so that every treated VERIFIED claim gets
    # its negative and no insertion is cut:
    "contrast-all": {
        "overrides": [
            "distill.evidence_contrast=1.0",
            "lora.layers_to_transform=null",
            "train.per_stage.stage2.max_minutes=null",
        ],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "contrast rows (deletion, edit, foreign, insertion) for every training claim, LoRA on "
        "all 30 layers, no stage time limit: stage 2 trained again (96 steps)",
    },
    # Declared while contrast-all trained, before any head had run: the base model's own likelihood reads the
    # reference where the adapter does not (on the 200 validation responses, the mean log-probability of a claim's
    # tokens after its own snippet minus after an empty one ranks own above foreign snippets with AUC 0.93 and
    # drops for 91% of the 55 deletions; /tmp exploration, nothing chosen on it). The evidence head
    # (backends/evidence_head.py) weighs that PMI with the adapter's label margin, fitted on the silver validation
    # split. Same criterion as above.
    "split50-head": {
        "overrides": ["train.per_stage.stage2.evidence_head=true", "train.per_stage.stage2.max_minutes=null"],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "the recipe's stage 2 (96 steps, top 8 layers, no contrast rows) with an evidence head",
    },
    "contrast-all-head": {
        "overrides": [
            "distill.evidence_contrast=1.0",
            "lora.layers_to_transform=null",
            "train.per_stage.stage2.evidence_head=true",
        ],
        "stages": ["stage2"],
        "own_silver": True,
        "from_adapter": "val-contrast-all",
        "what": "contrast-all's adapter with an evidence head",
    },
    # LoRA on all layers trains at about 9 s a step on this CPU (top 8: about 4), which the demo's 20 minutes cannot
    # hold; so also, declared with the two above: contrast rows for every claim on the recipe's top 8 layers, with
    # the head.
    "contrast-head": {
        "overrides": [
            "distill.evidence_contrast=1.0",
            "train.per_stage.stage2.evidence_head=true",
            "train.per_stage.stage2.max_minutes=null",
        ],
        "stages": ["stage2"],
        "own_silver": True,
        "links": "val-split50",
        "what": "contrast rows (all four kinds) for every training claim, top 8 layers, 96 steps, with "
        "an evidence head",
    },
    # 2026-11-27, declared before either ran (issue 46: on a 2-core AMD EPYC with AVX512-BF16 the demo cannot train
    # every step of the recipe and run its whole test inside 19 minutes). Both train stages 2 and 3 only, every step
    # (no time limit), on their own silver data as the recipe distils it; stage 1 is not involved. Criterion
    # (``val-claims NAME``): safe-rule turn accuracy from the human claims (stages 2-3, each validation response its
    # one claim) pooled over the 300 validation turns (FaithDial's 200 model responses, BEGIN-WoW's 60, FADE's 40);
    # steps-half is kept unless it is more than 2 points below steps-recipe (the point of it is the demo's time);
    # stage-2 accuracy reported beside. steps-quarter added while steps-recipe trained, before any result: of the
    # variants within 2 points of steps-recipe, the one that trains fewest steps is kept.
    "steps-recipe": {
        "overrides": ["train.per_stage.stage2.max_minutes=null", "train.per_stage.stage3.max_minutes=null"],
        "stages": ["stage2", "stage3"],
        "own_silver": True,
        "what": "the recipe's stages 2 and 3 as written (96 and 32 steps), every step trained",
    },
    "steps-half": {
        "overrides": [
            "train.per_stage.stage2.max_minutes=null",
            "train.per_stage.stage3.max_minutes=null",
            "train.per_stage.stage2.max_steps=48",
            "train.per_stage.stage3.max_steps=16",
        ],
        "stages": ["stage2", "stage3"],
        "own_silver": True,
        "what": "stages 2 and 3 trained half the recipe's steps (48 and 16)",
    },
    # Declared after steps-half's result (stage 2 at 48 steps as good as at 96, 77.3 against 77.0 at stage 2; stage 3
    # at 16 steps broken, safe 50.0 against 77.0) and before steps-quarter ran (stopped: its 8 stage-3 steps could
    # not be within 2 points): the two stages' step counts are chosen apart, each adapter as trained above.
    "steps-s2half": {
        "overrides": [
            "train.per_stage.stage2.max_minutes=null",
            "train.per_stage.stage3.max_minutes=null",
            "train.per_stage.stage2.max_steps=48",
        ],
        "stages": ["stage2", "stage3"],
        "own_silver": True,
        "adapters_from": {"stage2": "val-steps-half", "stage3": "val-steps-recipe"},
        "what": "stage 2 trained half the recipe's steps (48), stage 3 all 32 (steps-half's stage 2 adapter, "
        "steps-recipe's stage 3)",
    },
    "steps-quarter": {
        "overrides": [
            "train.per_stage.stage2.max_minutes=null",
            "train.per_stage.stage3.max_minutes=null",
            "train.per_stage.stage2.max_steps=24",
            "train.per_stage.stage3.max_steps=8",
        ],
        "stages": ["stage2", "stage3"],
        "own_silver": True,
        "what": "stages 2 and 3 trained a quarter of the recipe's steps (24 and 8)",
    },
}

SAMPLES = ROOT / "data" / "samples"
# the BEGIN / FADE training sources of the mix variants (recipe data.train entries)
BEGIN_FADE_TRAIN = [
    {"benchmark": "begin", "source": str(SAMPLES / "begin_wow" / "begin_train_wow.tsv"), "hold_out": False,
     "options": {"claims": "response"}},
    {"benchmark": "fade", "source": str(SAMPLES / "fade" / "train.csv"), "hold_out": False,
     "options": {"claims": "response"}},
]


def recipe(name: str, extra: list[str] | None = None):
    return harness.protocol_recipe(RECIPE, RUNS, name, extra or [])


def save(name: str, data: dict[str, Any], out: Path = OUT) -> None:
    harness.save(out, name, data)


machine = harness.machine


def step_prepare() -> None:
    from vista_distill.data.io import write_conversations
    from vista_distill.data.material import load_material
    from vista_distill.data.splits import dialogue_key
    from vista_distill.distill.run import run_distill
    from vista_distill.train.silver_data import load_silver

    r = recipe("chosen")
    material = load_material(r)
    run_distill(r, progress=False, material=material)
    val_keys = set(load_silver(RUNS / "silver", "stage2")["validation"]["dialogue_id"])
    val_keys |= set(load_silver(RUNS / "silver", "stage1")["validation"]["dialogue_id"])
    # validation turns: the FaithDial dialogues of the validation split (the test's kind of material;
    # Factcheck-GPT is a training-only source in the demo recipe)
    val = [c for c in material.train if dialogue_key(c) in val_keys and c.source == "FaithDial"]
    write_conversations(val, RUNS / "validation.jsonl")
    write_conversations(material.test, RUNS / "test.jsonl")
    # the FaithDial-only stage-2 silver (mix variant): the same examples without Factcheck-GPT's
    fd = RUNS / "silver-faithdial"
    shutil.rmtree(fd, ignore_errors=True)
    shutil.copytree(RUNS / "silver", fd)
    dd = load_silver(RUNS / "silver", "stage2")
    dd["train"] = dd["train"].filter(lambda row: row["source"] != "Factcheck-GPT")
    shutil.rmtree(fd / "stage2")
    dd.save_to_disk(str(fd / "stage2"))
    save("prepare", {"validation_conversations": len(val), "test_conversations": len(material.test),
                     "train_conversations": len(material.train) - len(val),
                     "faithdial_only_stage2_train": len(dd["train"])})


def evaluate(r, name: str, systems: list[str], input_path: Path) -> dict[str, Any]:
    from vista_distill.eval.run import run_eval

    res = run_eval(r, input_path=str(input_path), systems=systems,
                   output_dir=RUNS / name / f"eval-{input_path.stem}")
    return summarise(res.results)


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    from vista_distill.scoring.metrics import OVERALL

    out: dict[str, Any] = {"systems": {}, "majority": results["majority"].get(OVERALL)}
    for name, m in results["metrics"].items():
        g = (results.get("given_claims") or {}).get("systems", {}).get(name, {})
        out["systems"][name] = {
            "turn": {group: {rule: {k: t.get(k) for k in ("accuracy", "coverage", "n_gold", "macro_f1")}
                             for rule, t in v["turn"].items()} for group, v in m.items()},
            "claims_given": {group: {k: (c or {}).get(k) for k in ("binary_accuracy", "accuracy", "macro_f1",
                                                                    "n_labelled_matches")}
                             for group, c in g.items()},
            "claims_matched": {group: {k: (v.get("claim") or {}).get(k) for k in ("human_claims_matched", "set_f1")}
                               for group, v in m.items()},
        }
    out["significance"] = {"turn": results["significance"]["by_rule"],
                           "claims": (results.get("given_claims") or {}).get("significance")}
    return out


def step_base() -> None:
    r = recipe("base", ["eval.given_claims=true"])
    t = time.perf_counter()
    res = evaluate(r, "base", ["base"], RUNS / "validation.jsonl")
    save("validation_base", {"machine": machine(), "seconds": round(time.perf_counter() - t), **res})


def _train_variant(r, stages: list[str], ckpt: Path, others: Path, reuse: bool = False) -> dict[str, Any]:
    """Train the ``stages`` a variant changes into ``ckpt`` (``reuse``: keep adapters already there); the other
    stages link to ``others``' adapters."""
    from vista_distill.train.run import train_stage

    ckpt.mkdir(parents=True, exist_ok=True)
    trained: dict[str, Any] = {}
    for stage in ("stage1", "stage2", "stage3"):
        if reuse and (ckpt / stage / "adapter_config.json").exists():
            trained[stage] = "trained by an earlier run"
        elif stage in stages:
            s = train_stage(r, stage)
            trained[stage] = {"steps": s["results"]["global_step"], "train_loss": s["results"].get("train_loss"),
                              "seconds": s.get("runtime_s") or s["results"].get("train_runtime")}
        elif not (ckpt / stage).exists():
            (ckpt / stage).symlink_to(others / stage)
    return trained


def step_variant(name: str) -> None:
    v = VARIANTS[name]
    extra = list(v["overrides"]) + ["eval.given_claims=true"]
    silver = v.get("silver")
    if silver == "own":
        extra.append(f"distill.output_dir={RUNS / name / 'silver'}")
    elif silver == "faithdial":
        extra.append(f"train.silver_dir={RUNS / 'silver-faithdial'}")
    r = recipe(name, extra)
    if silver == "own":
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        run_distill(r, progress=False, material=load_material(r))
    t0 = time.perf_counter()
    trained = _train_variant(r, v["stages"], RUNS / name / "checkpoints", RUNS / "chosen" / "checkpoints")
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = evaluate(r, name, ["student"], RUNS / "validation.jsonl")
    save(f"validation_{name}", {"variant": name, "what": v["what"], "overrides": v["overrides"],
                                "machine": machine(), "trained": trained, "train_s": round(train_s),
                                "eval_s": round(time.perf_counter() - t1), **res})


def step_seed(seed: int) -> None:
    from vista_distill.train.run import train_stages

    name = f"seed{seed}"
    r = recipe(name, [f"train.seed={seed}", "eval.given_claims=true"])
    t0 = time.perf_counter()
    train_stages(r, "all")
    train_s = time.perf_counter() - t0
    systems = ["student", "base"] if seed == 0 else ["student"]
    t1 = time.perf_counter()
    res = evaluate(r, name, systems, RUNS / "test.jsonl")
    save(f"test_seed{seed}", {"seed": seed, "machine": machine(), "train_s": round(train_s),
                              "eval_s": round(time.perf_counter() - t1), **res})


def step_vista_dev() -> None:
    data = Path(os.environ.get("VISTA_DISTILL_DATA", ROOT.parent / "shared" / "data"))
    r = recipe("seed0", ["eval.given_claims=true", "pipeline.speakers=user,assistant"])
    t = time.perf_counter()
    res = evaluate(r, "seed0", ["student", "base"], data / "vista_human" / "dev.json")
    save("vista_human_dev", {"machine": machine(), "seconds": round(time.perf_counter() - t), **res})


VAL_MODELS = ROOT / "data" / "samples" / "faithdial_models_validation.jsonl"


def _stage2_checker(adapter: str | None):
    """``VistaScorer.check`` (stage 2 alone on (reference, claim) pairs): a stage-2 adapter with the student's
    prompts, or (no adapter) the prompted base with the few-shot prompts; the chosen recipe's pipeline settings."""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.scorer import VistaScorer

    r = recipe("chosen")
    backend = TransformersBackend(adapters={"stage2": adapter} if adapter else None, threads="auto")
    return VistaScorer.from_recipe(r, backend=backend, role="student" if adapter else "base")


def step_val_models(name: str, adapter: str | None) -> None:
    """Stage 2 alone on FaithDial's 200 validation model responses (100 faithful, 100 hallucinated; carved from
    the data-audit annotations, disjoint from the test), each response its turn's one claim, against its
    knowledge snippet (:func:`_stage2_checker`). Accuracy of the chosen label and ROC AUC of P(VERIFIED)."""
    from sklearn.metrics import roc_auc_score

    from vista_distill.data.io import read_conversations

    pairs = [
        (c.turns[-1].reference, claim) for c in read_conversations(VAL_MODELS) for claim in c.turns[-1].gold_claims
    ]
    gold = [claim.label == "VERIFIED" for _, claim in pairs]
    scorer = _stage2_checker(adapter)
    t = time.perf_counter()
    out = scorer.label_claims([ref for ref, _ in pairs], [claim.text for _, claim in pairs])
    save(f"val_models_{name}", {
        "name": name, "adapter": adapter, "prompts": scorer.config.style, "machine": machine(),
        "seconds": round(time.perf_counter() - t), "n": len(gold), "verified": sum(gold),
        "accuracy": sum((o["label"] == "VERIFIED") == g for o, g in zip(out, gold)) / len(gold),
        "roc_auc": roc_auc_score(gold, [o["p_verified"] for o in out]),
        "predicted_verified": sum(o["label"] == "VERIFIED" for o in out)})


def step_ref_swap(name: str, adapter: str | None) -> None:
    """Does stage 2 read the reference? Each of FaithDial's 200 validation responses (its one claim) is labelled
    against its own knowledge snippet and against another validation response's (seeded; sharing under half of
    the claim's content words, ``distill/augment.py content_words``), by :func:`_stage2_checker`. A scorer that
    reads the reference says VERIFIED to a faithful claim against its own snippet and not against a foreign one."""
    import random

    from sklearn.metrics import roc_auc_score

    from vista_distill.data.io import read_conversations
    from vista_distill.distill.augment import content_words

    convs = list(read_conversations(VAL_MODELS))
    refs = list(dict.fromkeys(c.turns[-1].reference for c in convs))
    rng = random.Random(0)
    docs, claims, rows = [], [], []
    for c in convs:
        turn = c.turns[-1]
        for claim in turn.gold_claims:
            words = content_words(claim.text)
            others = [x for x in refs if x != turn.reference
                      and (not words or len(words & content_words(x)) / len(words) < 0.5)]
            for kind, ref in (("own", turn.reference), ("foreign", rng.choice(others))):
                docs.append(ref)
                claims.append(claim.text)
                rows.append((kind, claim.label == "VERIFIED"))
    scorer = _stage2_checker(adapter)
    t = time.perf_counter()
    out = [(o["p_verified"], o["label"] == "VERIFIED") for o in scorer.label_claims(docs, claims)]
    res: dict[str, Any] = {}
    for kind in ("own", "foreign"):
        pv = [(p, v, g) for (p, v), (k, g) in zip(out, rows) if k == kind]
        res[kind] = {
            "said_verified": {
                "faithful": sum(v for _, v, g in pv if g),
                "hallucinated": sum(v for _, v, g in pv if not g),
            },
            "mean_p_verified": {
                "faithful": statistics.mean(p for p, _, g in pv if g),
                "hallucinated": statistics.mean(p for p, _, g in pv if not g),
            },
            "roc_auc": roc_auc_score([g for *_, g in pv], [p for p, *_ in pv]),
        }
    own = [p for (p, _), (k, _) in zip(out, rows) if k == "own"]
    foreign = [p for (p, _), (k, _) in zip(out, rows) if k == "foreign"]
    faithful = [g for k, g in rows if k == "own"]
    res["own_vs_foreign_auc_faithful"] = (
        roc_auc_score(  # P(VERIFIED) ranks a faithful claim's own snippet above a foreign one
            [1] * sum(faithful) + [0] * sum(faithful),
            [p for p, g in zip(own, faithful) if g] + [p for p, g in zip(foreign, faithful) if g],
        )
    )
    save(f"ref_swap_{name}", {"name": name, "adapter": adapter, "prompts": scorer.config.style,
                              "machine": machine(), "seconds": round(time.perf_counter() - t), "n": len(faithful),
                              "faithful": sum(faithful), **res})


def _variant_recipe(name: str):
    """(recipe, checkpoints folder) of the VAL_VARIANTS entry ``name`` under ``val-NAME``; its own silver data
    distilled first where it has some (``own_silver``) and none is there yet."""
    v = VAL_VARIANTS[name]
    run = f"val-{name}"
    extra = [*v["overrides"]]
    if v.get("own_silver"):
        extra.append(f"distill.output_dir={RUNS / run / 'silver'}")
    r = recipe(run, extra)
    if v.get("own_silver") and not (RUNS / run / "silver" / "manifest.json").exists():
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        run_distill(r, progress=False, material=load_material(r))
    return r, RUNS / run / "checkpoints"


def step_val_evidence(name: str) -> None:
    """Stage 2 of a VAL_VARIANTS entry (trained here first unless its adapter exists; its own silver data where it
    changes distill settings) or of the prompted base (``base``) on the 200 validation responses' claims, with the
    evidence probes (scoring/evidence.py): stage-2 accuracy, deletion flip rate, own-vs-foreign AUC, claim-only."""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer
    from vista_distill.scoring.evidence import evidence_metrics

    convs = list(read_conversations(VAL_MODELS))
    trained: dict[str, Any] = {}
    t0 = time.perf_counter()
    if name == "base":
        backend, style, v = TransformersBackend(threads="auto"), "fewshot", {"what": "prompted base", "overrides": []}
    else:
        v = VAL_VARIANTS[name]
        r, ckpt = _variant_recipe(name)
        if v.get("from_adapter") and not (ckpt / "stage2").exists():
            ckpt.mkdir(parents=True, exist_ok=True)
            shutil.copytree(RUNS / v["from_adapter"] / "checkpoints" / "stage2", ckpt / "stage2",
                            ignore=shutil.ignore_patterns("checkpoint-*", "evidence_head.json"))
        wants_head = "train.per_stage.stage2.evidence_head=true" in v["overrides"]
        if v.get("from_adapter") and wants_head and not (ckpt / "stage2" / "evidence_head.json").exists():
            from vista_distill.train.evidence_fit import fit_evidence_head

            trained = {"evidence_head": fit_evidence_head(r.for_stage("stage2"), ckpt / "stage2")}
        if not (ckpt / "stage2" / "adapter_config.json").exists():
            from vista_distill.train.run import train_stage

            s = train_stage(r, "stage2")
            trained = {"steps": s["results"]["global_step"], "train_loss": s["results"].get("train_loss"),
                       "seconds": s.get("runtime_s") or s["results"].get("train_runtime"),
                       "evidence_head": s.get("evidence_head")}
        backend = TransformersBackend(adapters={"stage2": ckpt / "stage2"}, threads="auto")
        style = "compact"
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    records = VistaScorer(backend=backend, style=style).evidence(convs)
    silver_manifest = RUNS / f"val-{name}" / "silver" / "manifest.json"
    save(f"val_evidence_{name}", {
        "variant": name, "what": v["what"], "overrides": v["overrides"], "machine": machine(), "trained": trained,
        "train_s": round(train_s), "eval_s": round(time.perf_counter() - t1),
        "evidence_contrast": (json.loads(silver_manifest.read_text()).get("evidence_contrast")
                              if silver_manifest.exists() else None),
        "evidence": evidence_metrics(records)})


def step_seed_claims(tag: str) -> None:
    """The test's human claims, touched once per seed, at claim level only (stage 2 with the evidence probes, no stage
    1: the whole pipeline over all 134 turns costs about 10 minutes a system on a 2-core CPU): ``base`` (the prompted
    base), ``demo`` (the adapters of a demo run, ``$DEMO_ADAPTERS``) or a seed N (the recipe's stage 2, with its
    evidence head, trained here with train.seed=N and the recipe's time limits, as the demo trains it)."""
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer
    from vista_distill.scoring.evidence import evidence_metrics

    trained: dict[str, Any] = {}
    t0 = time.perf_counter()
    if tag == "base":
        backend, style = TransformersBackend(threads="auto"), "fewshot"
    else:
        if tag == "demo":
            adapter = Path(os.environ["DEMO_ADAPTERS"]) / "stage2"
        else:
            from vista_distill.train.run import train_stage

            r = recipe(f"seed{tag}", [f"train.seed={tag}"])
            s = train_stage(r, "stage2")
            trained = {"steps": s["results"]["global_step"], "time_budget": s.get("time_budget"),
                       "evidence_head": s.get("evidence_head")}
            adapter = RUNS / f"seed{tag}" / "checkpoints" / "stage2"
        backend, style = TransformersBackend(adapters={"stage2": adapter}, threads="auto"), "compact"
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    records = VistaScorer(backend=backend, style=style).evidence(read_conversations(RUNS / "test.jsonl"))
    claims = [{k: r[k] for k in ("conversation_id", "turn_index", "claim_index", "gold", "own_label")}
              for r in records if r["probe"] == "claim_only"]
    save(f"test_claims_{tag}", {"tag": tag, "machine": machine(), "trained": trained, "train_s": round(train_s),
                                "eval_s": round(time.perf_counter() - t1), "evidence": evidence_metrics(records),
                                "claims": claims})


def step_claim_pairs() -> None:
    """Each ``test_claims_*`` student against ``test_claims_base``: stage-2 accuracy on the same human claims, exact
    McNemar (scoring.significance)."""
    from vista_distill.scoring.significance import mcnemar_test

    def right(tag: str) -> dict[tuple, bool]:
        d = json.loads((OUT / f"test_claims_{tag}.json").read_text())
        return {
            (c["conversation_id"], c["turn_index"], c["claim_index"]): c["own_label"] == c["gold"] for c in d["claims"]
        }

    base = right("base")
    rows = {}
    for path in sorted(OUT.glob("test_claims_*.json")):
        tag = path.stem.removeprefix("test_claims_")
        if tag == "base":
            continue
        st = right(tag)
        keys = sorted(set(st) & set(base))
        b = sum(st[k] and not base[k] for k in keys)
        c = sum(base[k] and not st[k] for k in keys)
        p = mcnemar_test(b, c)["pvalue"]
        ev = json.loads(path.read_text())["evidence"]
        rows[tag] = {
            "claims": len(keys),
            "student": sum(st[k] for k in keys) / len(keys),
            "base": sum(base[k] for k in keys) / len(keys),
            "only_student": b,
            "only_base": c,
            "p": p,
            "deletion_flip_rate": ev["deletion_flip_rate"],
            "foreign_reference_auc": ev["foreign_reference_auc"],
            "claim_only_accuracy": ev["claim_only_accuracy"],
        }
    save("test_claim_pairs", rows)


def _val_set(name: str) -> Path:
    """``models``: FaithDial's 200 validation model responses; ``begin-fade``: the BEGIN-WoW (60) and FADE (40 rows)
    validation files (build_sample in data/benchmarks/begin.py and fade.py), each response its one claim, as one
    conversation file."""
    if name == "models":
        return VAL_MODELS
    from vista_distill.data.benchmarks import load_benchmark
    from vista_distill.data.io import write_conversations

    path = RUNS / "validation-begin-fade.jsonl"
    convs = [*load_benchmark("begin", SAMPLES / "begin_wow" / "begin_validation_wow.tsv", claims="response"),
             *load_benchmark("fade", SAMPLES / "fade" / "validation.csv", claims="response")]
    write_conversations(convs, path)
    return path


def step_val_claims(name: str) -> None:
    """Stages 2-3 of a VAL_VARIANTS entry (trained here first unless its adapters exist, on its own silver data
    where it has some) on the human claims of the 300 validation turns (FaithDial's 200 model responses and the
    BEGIN-WoW / FADE validation rows, :func:`_val_set`), no stage 1 and no probes: stage-2 accuracy and the turn
    accuracy the claims' labels and categories give under the safe and strict rules."""
    from vista_distill.backends.factory import backend_for
    from vista_distill.data.io import read_conversations
    from vista_distill.scoring.metrics import given_claims_metrics, turn_metrics
    from vista_distill.scoring.run import run_given_claims
    from vista_distill.train.run import train_stage

    v = VAL_VARIANTS[name]
    r, ckpt = _variant_recipe(name)
    for stage, src in (v.get("adapters_from") or {}).items():   # adapters another variant trained
        ckpt.mkdir(parents=True, exist_ok=True)
        if not (ckpt / stage).exists():
            (ckpt / stage).symlink_to(RUNS / src / "checkpoints" / stage)
    trained: dict[str, Any] = {}
    t0 = time.perf_counter()
    for stage in v["stages"]:
        if not (ckpt / stage / "adapter_config.json").exists():
            s = train_stage(r, stage)
            trained[stage] = {k: s.get(k) for k in ("evidence_head", "pmi_head", "label_prior")} | {
                "steps": s["results"]["global_step"],
                "seconds": s.get("runtime_s") or s["results"].get("train_runtime"),
            }
    train_s = time.perf_counter() - t0
    convs = [*read_conversations(_val_set("models")), *read_conversations(_val_set("begin-fade"))]
    backend = backend_for(r, "student", adapters={st: ckpt / st for st in v["stages"]})
    t1 = time.perf_counter()
    records, _ = run_given_claims(convs, r.engine_config("student"), backend, evidence_seed=None)
    claims = given_claims_metrics(records)
    turns = {rule: {k: turn_metrics(records, rule).get(k) for k in ("accuracy_all", "coverage", "n_gold")}
             for rule in ("safe", "strict")}
    save(f"val_claims_{name}", {
        "variant": name, "what": v["what"], "overrides": v["overrides"], "machine": machine(), "trained": trained,
        "train_s": round(train_s), "eval_s": round(time.perf_counter() - t1), "turns": len(convs),
        "turn_accuracy": turns,
        "stage2_accuracy": {src: (c or {}).get("binary_accuracy") for src, c in claims.items()},
        "stage3": {src: {k: (c or {}).get(k) for k in ("accuracy", "macro_f1")} for src, c in claims.items()}})


def step_val_turns(name: str, val_set: str = "models") -> None:
    """The whole pipeline (stages 1-3, and stages 2-3 on the given claims) on a validation set (``_val_set``): the
    prompted base (``base``) or a VAL_VARIANTS entry, trained here first unless its adapters exist (its own silver
    data where it changes a loader option or adds sources)."""
    import dataclasses

    tag = os.environ.get("VAL_TAG", "")   # a second evaluation of the same adapters (e.g. after a decoding fix)
    suffix = tag + ("" if val_set == "models" else f"_{val_set}")
    data = _val_set(val_set)
    if name == "base":
        r = recipe("val-base", ["eval.given_claims=true"])
        t = time.perf_counter()
        res = evaluate(r, f"val-base{tag}", ["base"], data)
        save(f"val_turns_base{suffix}", {"machine": machine(), "eval_s": round(time.perf_counter() - t), **res})
        return
    v = VAL_VARIANTS[name]
    run = f"val-{name}"
    extra = [*v["overrides"], "eval.given_claims=true"]
    own_silver = bool(v.get("options") or v.get("add_sources") or v.get("own_silver"))
    if own_silver:
        extra.append(f"distill.output_dir={RUNS / run / 'silver'}")
    r = recipe(run, extra)
    if own_silver:
        from vista_distill.config import DataSource
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        sources = list(r.data.train)
        for i, opts in (v.get("options") or {}).items():
            sources[i] = dataclasses.replace(sources[i], options={**sources[i].options, **opts})
        if v.get("add_sources") == "begin-fade":
            sources += [DataSource(**s) for s in BEGIN_FADE_TRAIN]
        r = dataclasses.replace(r, data=dataclasses.replace(r.data, train=sources))
        if not (RUNS / run / "silver" / "manifest.json").exists():
            run_distill(r, progress=False, material=load_material(r))
    t0 = time.perf_counter()
    trained = _train_variant(r, v["stages"], RUNS / run / "checkpoints",
                             RUNS / v.get("links", "val-recipe") / "checkpoints",
                             reuse=bool(tag) or val_set != "models" or os.environ.get("PROTOCOL_REUSE") == "1")
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = evaluate(r, f"{run}{tag}", ["student"], data)
    save(f"val_turns_{name}{suffix}", {"variant": name, "what": v["what"], "overrides": v["overrides"],
                                       "options": v.get("options"), "add_sources": v.get("add_sources"),
                                       "machine": machine(), "trained": trained, "train_s": round(train_s),
                                       "eval_s": round(time.perf_counter() - t1), **res})


def _records(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["conversation_id"], r["turn_index"]): r for r in map(json.loads, path.open()) if r.get("scored")}


def step_pairs() -> None:
    """McNemar (exact) of each seed's student against the prompted base on the test turns, at claim level
    (stage 2 on the human claims) and turn level (strict, safe; an unknown verdict is wrong): the base ran once,
    with seed 0 (the main job's run, copied into $PROTOCOL_RUNS/seed0/eval-test-demo), and does not depend on
    the seed, so seeds 1 and 2 are paired with its records."""
    from vista_distill.scoring.significance import paired_mcnemar

    # the base's run over the whole test (``seed 0`` evaluating the demo's adapters) where there is one; else the demo's
    full = (RUNS / "seed0" / "eval-test" / "records" / "base.jsonl").exists()
    base_dir = RUNS / "seed0" / ("eval-test" if full else "eval-test-demo") / "records"
    base_claims, base_turns = _records(base_dir / "base.given_claims.jsonl"), _records(base_dir / "base.jsonl")

    def claims_right(r: dict[str, Any]) -> list[bool]:
        return [(c.get("stage2") or {}).get("label") == ("VERIFIED" if g["label"] == "VERIFIED" else "UNVERIFIABLE")
                for c, g in zip(r["claims"], r["gold_claims"])]

    out: dict[str, Any] = {"machine": machine()}
    for seed in (0, 1, 2):
        d = RUNS / f"seed{seed}" / ("eval-test-demo" if seed == 0 and not full else "eval-test") / "records"
        if not (d / "student.jsonl").exists():
            continue
        claims, turns = _records(d / "student.given_claims.jsonl"), _records(d / "student.jsonl")
        keys = sorted(base_turns)
        levels = {"claims (stage 2)": ([x for k in keys for x in claims_right(claims[k])],
                                       [x for k in keys for x in claims_right(base_claims[k])])}
        for rule in ("strict", "safe"):
            levels[f"turns ({rule})"] = ([turns[k]["verdicts"][rule] == turns[k]["gold_label"] for k in keys],
                                         [base_turns[k]["verdicts"][rule] == base_turns[k]["gold_label"] for k in keys])
        out[f"seed{seed}"] = {level: paired_mcnemar(a, b) for level, (a, b) in levels.items()}   # 1 = student, 2 = base
    save("test_pairs", out)
    print(json.dumps(out, indent=1))


def step_report() -> None:
    """Tables of every result file in bench/results/demo_protocol (validation variants, test seeds)."""
    rows = []
    for path in sorted(OUT.glob("validation_*.json")):
        d = json.loads(path.read_text())
        name = path.stem.removeprefix("validation_")
        for system, m in d["systems"].items():
            c = m["claims_given"].get("overall") or {}
            t = m["turn"].get("overall") or {}
            rows.append(
                f"| {name} | {system} | {d.get('what', 'the prompted base, few-shot prompts')} | "
                f"{c.get('n_labelled_matches')} | {_pct(c.get('binary_accuracy'))} | "
                f"{_pct((t.get('strict') or {}).get('accuracy'))} ({_pct((t.get('strict') or {}).get('coverage'))}) | "
                f"{_pct((t.get('safe') or {}).get('accuracy'))} | {d.get('train_s', '–')} | "
                f"{d.get('eval_s', d.get('seconds', '–'))} |"
            )
        maj = d.get("majority") or {}
    lines = [
        "| variant | system | what changes | claims | stage 2 acc | turn acc strict (coverage) | turn acc safe "
        "| train s | eval s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    if rows:
        lines.append(
            f"| majority label | – | – | {(maj.get('claim') or {}).get('human_claims')} | "
            f"{_pct((maj.get('claim') or {}).get('binary_accuracy'))} | "
            f"{_pct((maj.get('turn') or {}).get('accuracy'))} | – | – | – |"
        )
    (OUT / "validation_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _test_tables()


def _row(m: dict[str, Any]) -> tuple[Any, Any, Any]:
    c = m["claims_given"].get("overall") or {}
    t = m["turn"].get("overall") or {}
    return c.get("binary_accuracy"), (t.get("strict") or {}).get("accuracy"), (t.get("safe") or {}).get("accuracy")


def _test_tables() -> None:
    """The final configuration's seeds on the test material (mean and spread) and the VISTA human dev set."""
    demo = OUT / "test_seed0_demo.json"   # the main job's own measured run (bench/results/demo_cpu)
    seeds = sorted(x for x in OUT.glob("test_seed*.json") if x != demo)
    # seed 0 is the demo's run unless ``seed 0`` evaluated its adapters on the whole test (the demo's time budget may
    # have cut its evaluation short); then the demo's run is listed apart, outside the mean
    whole = any(x.name == "test_seed0.json" for x in seeds)
    # turn accuracy over the turns each system gave a verdict for (the pairs in test_pairs.json count the rest wrong)
    lines = ["| seed | system | claims (stage 2) | turns strict (with a verdict) | turns safe (with a verdict) |",
             "| --- | --- | ---: | ---: | ---: |"]
    per: dict[str, list[tuple]] = {}
    for path in ([] if whole or not demo.exists() else [demo]) + seeds:
        d = json.loads(path.read_text())
        for system, m in d["systems"].items():
            row = _row(m)
            per.setdefault(system, []).append(row)
            lines.append(f"| {d.get('seed', 0)} | {system} | " + " | ".join(_pct(x) for x in row) + " |")
    if whole and demo.exists():
        d = json.loads(demo.read_text())
        n = (d.get("material") or {}).get("scored_turns")
        lines += [
            f"| 0, the demo's own evaluation ({n} turns) | {system} | " + " | ".join(_pct(x) for x in _row(m)) + " |"
            for system, m in d["systems"].items()
        ]
    for system, rows in per.items():
        if len(rows) > 1:
            cols = list(zip(*rows))
            lines.append(f"| mean ± sd ({len(rows)} seeds) | {system} | " + " | ".join(
                f"{_pct(statistics.mean(c))} ± {_pct(statistics.stdev(c))}" for c in cols) + " |")
    dev = OUT / "vista_human_dev.json"
    if dev.exists():
        d = json.loads(dev.read_text())
        lines += ["", "vista_human/dev.json (seed 0's adapters; never trained on):", "",
                  "| system | claims (stage 2) | turns strict | turns safe |", "| --- | ---: | ---: | ---: |"]
        for system, m in d["systems"].items():
            lines.append(f"| {system} | " + " | ".join(_pct(x) for x in _row(m)) + " |")
        maj = d.get("majority") or {}
        lines.append(
            f"| majority label | {_pct((maj.get('claim') or {}).get('binary_accuracy'))} | "
            f"{_pct((maj.get('turn') or {}).get('accuracy'))} | {_pct((maj.get('turn') or {}).get('accuracy'))} |"
        )
    (OUT / "test_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["prepare", "base", "variant", "seed", "vista-dev", "val-models", "val-turns",
                                     "ref-swap", "val-evidence", "val-claims", "seed-claims", "claim-pairs", "pairs",
                                     "report"])
    ap.add_argument("arg", nargs="?")
    ap.add_argument("adapter", nargs="?")
    a = ap.parse_args()
    RUNS.mkdir(parents=True, exist_ok=True)
    if a.step == "prepare":
        step_prepare()
    elif a.step == "base":
        step_base()
    elif a.step == "variant":
        if a.arg not in VARIANTS:
            sys.exit(f"variant must be one of {list(VARIANTS)}")
        step_variant(a.arg)
    elif a.step == "seed":
        step_seed(int(a.arg))
    elif a.step == "report":
        step_report()
    elif a.step == "pairs":
        step_pairs()
    elif a.step == "val-models":
        step_val_models(a.arg, a.adapter)
    elif a.step == "seed-claims":
        step_seed_claims(a.arg)
    elif a.step == "claim-pairs":
        step_claim_pairs()
    elif a.step == "val-evidence":
        step_val_evidence(a.arg)
    elif a.step == "val-claims":
        step_val_claims(a.arg)
    elif a.step == "ref-swap":
        step_ref_swap(a.arg, a.adapter)
    elif a.step == "val-turns":
        if a.arg != "base" and a.arg not in VAL_VARIANTS:
            sys.exit(f"val-turns takes base or one of {list(VAL_VARIANTS)}")
        if (a.adapter or "models") not in ("models", "begin-fade"):
            sys.exit("val-turns NAME [models|begin-fade]")
        step_val_turns(a.arg, a.adapter or "models")
    else:
        step_vista_dev()


if __name__ == "__main__":
    main()
