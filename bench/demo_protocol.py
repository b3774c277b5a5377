"""python bench/demo_protocol.py prepare            # silver data, validation conversations
python bench/demo_protocol.py base               # the prompted base on validation (once)
python bench/demo_protocol.py variant NAME       # one variant: train what it changes, validate
python bench/demo_protocol.py seed N             # the chosen recipe with train.seed=N: train, test once
python bench/demo_protocol.py vista-dev          # seed 0's adapters and the base on vista_human/dev.json
python bench/demo_protocol.py val-models NAME [ADAPTER]   # stage 2 alone on the 200 validation responses
python bench/demo_protocol.py val-turns NAME [SET]   # the whole pipeline on a validation set (SET: models, the 200
                                                 # FaithDial responses, or begin-fade) of a val-* variant
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
validation turns. Variants are judged on validation only, in rounds (``bench/demo_protocol.yaml``, read by
:func:`load_variants`): each round names the step that measures its variants and a criterion fixed before any of
them ran:

* ``variant NAME``: stages 2-3 on the validation dialogues' human claims (claim level) and the whole student
  pipeline on those dialogues (turn level, strict and safe rules);
* ``val-turns``, ``val-claims``, ``val-evidence`` (run folders ``val-NAME``): the whole pipeline, stages 2-3 on the
  human claims, or stage 2 with the evidence probes, on the validation responses.

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
import yaml

from vista_distill.runtime.numbers import percent as _pct

ROOT = Path(__file__).resolve().parents[1]

RECIPE = ROOT / "recipes" / "demo-cpu.yaml"
RUNS = Path(os.environ.get("PROTOCOL_RUNS", "/tmp/vista-protocol"))
OUT = ROOT / "bench" / "results" / "demo_protocol"

# The variants, as rounds (bench/demo_protocol.yaml; its header documents every key): VARIANTS are the variants of
# the rounds the ``variant`` step judges, VAL_VARIANTS those of the val-* steps.
PROTOCOL = Path(__file__).with_name("demo_protocol.yaml")
JUDGES = ("variant", "val-turns", "val-evidence", "val-claims")
ROUND_KEYS = {"name", "judged_by", "criterion", "why", "untrained_from", "variants"}
REQUIRED = {"what", "why", "overrides", "stages"}
VAL_ONLY = {"trained_by", "stage2_copied_from", "loader_options", "add_sources"}
ALLOWED = {"variant": REQUIRED | {"silver", "untrained_from"}}
ALLOWED["val"] = ALLOWED["variant"] | VAL_ONLY
SILVER = {"variant": {None, "own", "faithdial-only"}, "val": {None, "own"}}


class _UniqueKeys(yaml.SafeLoader):
    """yaml's safe loader, refusing a key given twice in one mapping (plain yaml keeps the last)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        if len(keys) != len(set(keys)):
            raise ValueError(f"line {node.start_mark.line + 1}: a key given twice in {sorted(map(str, keys))}")
        return super().construct_mapping(node, deep)


def load_variants(path: Path = PROTOCOL) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(VARIANTS, VAL_VARIANTS)`` from the rounds in ``path``, each variant with its ``untrained_from`` resolved
    (its own, else its round's, else ``val-recipe``); a key or value the header does not document is refused."""
    tables: dict[str, dict[str, dict[str, Any]]] = {"variant": {}, "val": {}}
    for rnd in yaml.load(path.read_text(), Loader=_UniqueKeys)["rounds"]:
        if set(rnd) - ROUND_KEYS or rnd.get("judged_by") not in JUDGES:
            raise ValueError(f"{path.name}: round {rnd.get('name')!r}: keys {sorted(rnd)}, "
                             f"judged_by {rnd.get('judged_by')!r}")
        kind = "variant" if rnd["judged_by"] == "variant" else "val"
        for name, v in rnd["variants"].items():
            bad = (set(v) - ALLOWED[kind]) | (REQUIRED - set(v))
            if (bad or v.get("silver") not in SILVER[kind] or name in {**tables["variant"], **tables["val"]}
                    or not set(v["stages"]) <= {"stage1", "stage2", "stage3"}):
                raise ValueError(f"{path.name}: variant {name!r}: keys {sorted(bad)}, silver {v.get('silver')!r}, "
                                 f"stages {v.get('stages')} (or the name taken)")
            tables[kind][name] = {"untrained_from": rnd.get("untrained_from", "val-recipe"), **v}
    return tables["variant"], tables["val"]


VARIANTS, VAL_VARIANTS = load_variants()

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
            trained[stage] = "already trained in this run folder"
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
    elif silver == "faithdial-only":
        extra.append(f"train.silver_dir={RUNS / 'silver-faithdial'}")
    r = recipe(name, extra)
    if silver == "own":
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        run_distill(r, progress=False, material=load_material(r))
    t0 = time.perf_counter()
    trained = _train_variant(r, v["stages"], RUNS / name / "checkpoints", RUNS / v["untrained_from"] / "checkpoints")
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
    (``silver: own``) distilled first unless it is there already."""
    v = VAL_VARIANTS[name]
    run = f"val-{name}"
    extra = [*v["overrides"]]
    own = v.get("silver") == "own"
    if own:
        extra.append(f"distill.output_dir={RUNS / run / 'silver'}")
    r = recipe(run, extra)
    if own and not (RUNS / run / "silver" / "manifest.json").exists():
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        run_distill(r, progress=False, material=load_material(r))
    return r, RUNS / run / "checkpoints"


def step_val_evidence(name: str) -> None:
    """Stage 2 of a VAL_VARIANTS entry (trained here first unless its adapter exists, or copied from
    ``stage2_copied_from``; its own silver data where it has ``silver: own``) or of the prompted base (``base``) on
    the 200 validation responses' claims, with the evidence probes (scoring/evidence.py): stage-2 accuracy, deletion
    flip rate, own-vs-foreign AUC, claim-only."""
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
        copied_from = v.get("stage2_copied_from")
        if copied_from and not (ckpt / "stage2").exists():
            ckpt.mkdir(parents=True, exist_ok=True)
            shutil.copytree(RUNS / copied_from / "checkpoints" / "stage2", ckpt / "stage2",
                            ignore=shutil.ignore_patterns("checkpoint-*", "evidence_head.json"))
        wants_head = "train.per_stage.stage2.evidence_head=true" in v["overrides"]
        if copied_from and wants_head and not (ckpt / "stage2" / "evidence_head.json").exists():
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
    """Stages 2-3 of a VAL_VARIANTS entry (trained here first unless its adapters exist or ``trained_by`` names
    them, on its own silver data where it has ``silver: own``) on the human claims of the 300 validation turns
    (FaithDial's 200 model responses and the BEGIN-WoW / FADE validation rows, :func:`_val_set`), no stage 1 and no
    probes: stage-2 accuracy and the turn accuracy the claims' labels and categories give under the safe and strict
    rules."""
    from vista_distill.backends.factory import backend_for
    from vista_distill.data.io import read_conversations
    from vista_distill.scoring.metrics import given_claims_metrics, turn_metrics
    from vista_distill.scoring.run import run_given_claims
    from vista_distill.train.run import train_stage

    v = VAL_VARIANTS[name]
    r, ckpt = _variant_recipe(name)
    for stage, src in (v.get("trained_by") or {}).items():   # adapters another run trained with these settings
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
    data where it has ``silver: own``, ``loader_options`` or ``add_sources``), its other stages ``untrained_from``'s."""
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
    own_silver = bool(v.get("loader_options") or v.get("add_sources") or v.get("silver") == "own")
    if own_silver:
        extra.append(f"distill.output_dir={RUNS / run / 'silver'}")
    r = recipe(run, extra)
    if own_silver:
        from vista_distill.config import DataSource
        from vista_distill.data.material import load_material
        from vista_distill.distill.run import run_distill

        sources = list(r.data.train)
        for i, opts in (v.get("loader_options") or {}).items():
            sources[i] = dataclasses.replace(sources[i], options={**sources[i].options, **opts})
        if v.get("add_sources") == "begin-fade":
            sources += [DataSource(**s) for s in BEGIN_FADE_TRAIN]
        r = dataclasses.replace(r, data=dataclasses.replace(r.data, train=sources))
        if not (RUNS / run / "silver" / "manifest.json").exists():
            run_distill(r, progress=False, material=load_material(r))
    t0 = time.perf_counter()
    trained = _train_variant(r, v["stages"], RUNS / run / "checkpoints",
                             RUNS / v["untrained_from"] / "checkpoints",
                             reuse=bool(tag) or val_set != "models" or os.environ.get("PROTOCOL_REUSE") == "1")
    train_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = evaluate(r, f"{run}{tag}", ["student"], data)
    save(f"val_turns_{name}{suffix}", {"variant": name, "what": v["what"], "overrides": v["overrides"],
                                       "options": v.get("loader_options"), "add_sources": v.get("add_sources"),
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
