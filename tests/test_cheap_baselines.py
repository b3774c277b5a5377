"""backends/cheap_baselines.py: the cheap baselines a student must beat (majority, overlap, pmi) as backends, run
through the same engine, records and evaluation as the student; scoring/baselines_beside.py: them beside a scorer."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from vista_distill.backends.cheap_baselines import BaselineBackend, decompose, majority_labels
from vista_distill.backends.evidence_head import EvidenceHead
from vista_distill.data.io import read_conversations
from vista_distill.pipeline.engine import EngineConfig
from vista_distill.pipeline.evidence import coverage
from vista_distill.pipeline.protocol import Fields
from vista_distill.pipeline.templates import get_template, stage_request
from vista_distill.scoring.run import run_given_claims, run_pipeline

V, U = "VERIFIED", "UNVERIFIABLE"


def test_overlap_rule_through_the_whole_pipeline(sample_path):
    """Stage 1 is the turn's sentences, stage 2 the overlap rule on the reference, stage 3 LACKING EVIDENCE; turn
    verdicts follow from them under VISTA's rules like any system's."""
    convs = read_conversations(sample_path)
    records, _ = run_pipeline(convs, EngineConfig(style="compact"), BaselineBackend("overlap"))
    scored = [r for r in records if r["scored"] and r["reference"]]
    assert scored
    for r in scored:
        texts = [c["text"] for c in r["claims"]]
        assert texts and set(texts) <= set(decompose(r["text"]))   # its sentences (the parser drops fillers)
        for c in r["claims"]:
            share = coverage(c["text"], r["reference"])
            assert (c["category"] == V) == (share is not None and share >= 0.5)
            if c["category"] != V:
                assert c["category"] == "LACKING EVIDENCE"
        assert (r["verdicts"]["strict"] == "faithful") == all(c["category"] == V for c in r["claims"])


def test_overlap_and_majority_on_the_human_claims_with_probes(sample_path):
    convs = read_conversations(sample_path)
    cfg = EngineConfig(style="compact")
    records, probes = run_given_claims(convs, cfg, BaselineBackend("overlap"), evidence_seed=0)
    claims = [(r, c) for r in records if r["scored"] and r.get("gold_claims") for c in r["claims"]]
    assert [c["text"] for _, c in claims] == [g["text"] for r in records if r["scored"] and r.get("gold_claims")
                                                for g in r["gold_claims"]]
    # the probe records carry the overlap share the strata are cut by, and the rule's answers to the probes
    assert any(p["probe"] == "claim_only" and p["overlap"] is not None for p in probes)
    assert all(p["label"] == U for p in probes if p["probe"] == "claim_only")   # empty reference: no words
    majority = BaselineBackend("majority", majority={"stage2": U, "stage3": "OUT-OF-SCOPE"})
    records, _ = run_given_claims(convs, cfg, majority, evidence_seed=None)
    cats = {c["category"] for r in records if r["scored"] for c in r["claims"]}
    assert cats == {"OUT-OF-SCOPE"}   # every claim unverifiable, then out of scope: every turn safe
    assert all(r["verdicts"]["safe"] == "faithful" for r in records if r["scored"] and r["claims"])


def test_whole_reference_probes_on_the_named_conversations_only(sample_path):
    """eval.evidence_conversations: deletion, foreign and edit (a whole reference sent again) only for the named
    conversations' claims; claim_only (the strata's records) for every claim, the same as with all probes."""
    convs = read_conversations(sample_path)
    cfg = EngineConfig(style="compact")
    _, every = run_given_claims(convs, cfg, BaselineBackend("overlap"), evidence_seed=0)
    whole = [p for p in every if p["probe"] in ("deletion", "foreign", "edit")]
    first = whole[0]["conversation_id"]
    assert {p["conversation_id"] for p in whole} - {first}   # the sample has such probes beyond one conversation
    _, part = run_given_claims(convs, cfg, BaselineBackend("overlap"), evidence_seed=0, reference_probes={first})
    assert [p for p in part if p["probe"] in ("deletion", "foreign", "edit")] == \
        [p for p in whole if p["conversation_id"] == first]
    assert [p for p in part if p["probe"] == "claim_only"] == [p for p in every if p["probe"] == "claim_only"]


def test_majority_labels_are_the_silver_training_majority(tmp_path):
    from datasets import load_from_disk
    from helpers import distill_sample

    silver = distill_sample(tmp_path / "silver")
    labels = majority_labels(silver)
    for stage in ("stage2", "stage3"):
        counts = Counter(load_from_disk(str(silver / stage))["train"]["label"])
        top = max(counts.values())
        assert counts[labels[stage]] == top and labels[stage] == min(k for k, v in counts.items() if v == top)
    with pytest.raises(ValueError, match="needs its labels"):
        BaselineBackend("majority")
    with pytest.raises(ValueError, match="unknown rule"):
        BaselineBackend("coin")


def test_pmi_rule_labels_by_the_base_models_pmi_and_leaves_its_heads_alone(embedded_backend):
    t = get_template("stage2", "compact")
    ref = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889."
    claims = ["The Eiffel Tower was completed in 1889.", "i love going to the beach in summer , it is so relaxing !"]
    reqs = [stage_request(t, Fields(reference=ref, claim=c), labels=t.labels) for c in claims]
    head = EvidenceHead(w_margin=0.0, w_pmi=5.0, bias=0.0)
    before = dict(embedded_backend.heads)
    out = BaselineBackend("pmi", model=embedded_backend, head=head).run(reqs)
    assert embedded_backend.heads == before
    for o in out:
        pmi = o.meta["evidence"]["pmi"]
        assert o.label == (V if pmi > 0 else U) and o.probs[V] == pytest.approx(head.p_verified(0.0, pmi))
    assert out[0].meta["evidence"]["pmi"] > out[1].meta["evidence"]["pmi"]
    # against an empty reference (the claim-only probe) the PMI is 0: the same answer as the model's, without it
    empty = [stage_request(t, Fields(reference="", claim=c), labels=t.labels) for c in claims]
    shortcut = BaselineBackend("pmi", model=embedded_backend, head=EvidenceHead(w_margin=0.0, w_pmi=5.0, bias=0.3))
    fast = shortcut.run(empty)
    assert shortcut.stats["model_requests"] == 0
    embedded_backend.heads = {"stage2": shortcut.head}
    try:
        slow = embedded_backend.run(empty)
    finally:
        embedded_backend.heads = before
    for f, m in zip(fast, slow):
        assert m.meta["evidence"]["pmi"] == 0.0 and f.label == m.label == V
        assert f.probs[V] == pytest.approx(m.probs[V]) and f.meta["evidence"]["pmi"] == 0.0


def test_eval_runs_the_cheap_baselines_beside_the_student_with_mcnemar(tmp_path, sample_path, tiny_smollm2):
    """run_eval with majority, overlap and pmi: each a system with records, turn and claim metrics, and a McNemar
    test against every other; pmi's threshold is fitted on the silver validation split and saved (pmi on the tiny
    random SmolLM2: the fit and the records are tested, not the figures)."""
    from helpers import EVAL_RECIPE, distill_sample, eval_overrides

    from vista_distill.config import load_recipe
    from vista_distill.eval.run import run_eval

    silver = distill_sample(tmp_path / "silver")
    recipe = load_recipe(EVAL_RECIPE, [*eval_overrides(tmp_path), f"distill.output_dir={silver}",
                                       "eval.given_claims=true", f"student.model={tiny_smollm2}"])
    result = run_eval(recipe, input_path=str(sample_path), output_dir=tmp_path / "out",
                      systems=["majority", "overlap", "pmi"])
    systems = result.results["systems"]
    assert all(systems[n]["status"] == "ok" for n in ("majority", "overlap", "pmi")), systems
    assert (tmp_path / "checkpoints" / "pmi_head.json").exists()
    assert systems["pmi"]["description"]["head"]["fitted"]["features"] == ["pmi"]
    assert systems["majority"]["description"]["labels"] == majority_labels(silver)
    pairs = {
        (p["system_1"], p["system_2"]) for p in result.results["given_claims"]["significance"]["stage2"]["overall"]
    }
    assert pairs == {("majority", "overlap"), ("majority", "pmi"), ("overlap", "pmi")}
    turns = result.results["given_claims"]["turns"]["overlap"]["safe"]
    assert turns["n_gold"] > 0 and 0 <= turns["accuracy"] <= 1
    ev = systems["overlap"]["evidence"]
    assert ev["strata"]["verified_low_overlap"]["accuracy"] in (0.0, None)
    assert ev["strata"]["unverifiable_high_overlap"]["accuracy"] in (0.0, None)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "edit flip rate" in report and "Turn verdicts from the human claims" in report
    # with no silver data the rules that need it are skipped, with the reason
    bare = dataclasses.replace(recipe, distill=dataclasses.replace(recipe.distill, output_dir=str(tmp_path / "none")),
                               train=dataclasses.replace(recipe.train, output_dir=str(tmp_path / "none-ck")))
    skipped = run_eval(bare, input_path=str(sample_path), output_dir=tmp_path / "out2", systems=["majority", "pmi"])
    for n in ("majority", "pmi"):
        assert skipped.results["systems"][n]["status"] == "skipped" and "silver" in skipped.results["systems"][n][
            "reason"].lower()


def test_score_puts_the_cheap_baselines_beside_the_scorer_on_human_claims(sample_path):
    """``VistaScorer.score`` on input with human claims: the overlap rule (and the majority rule, given its labels)
    on the same claims, claim and turn accuracy, McNemar of the scorer against each. A scorer answering from the
    human labels is right on every claim, so it is at least as accurate as each rule."""
    from vista_distill.backends.human_labels import LabelsBackend
    from vista_distill.scorer import VistaScorer

    convs = read_conversations(sample_path)
    scorer = VistaScorer(backend=LabelsBackend(convs), style="compact")
    scorer.majority = {"stage2": V, "stage3": "LACKING EVIDENCE"}
    b = scorer.score(convs, evidence=True).summary["baselines"]
    n = sum(len(t.gold_claims or []) for c in convs for t in c.turns if t.role == "assistant" and t.reference)
    assert b["claims"]["scorer"] == {"n": n, "accuracy": 1.0}
    assert set(b["claims"]) == {"scorer", "overlap", "majority"}
    for name in ("overlap", "majority"):
        assert b["claims"][name]["n"] == n and b["claims"][name]["accuracy"] < 1.0
    assert b["turns"]["scorer"]["safe"]["accuracy"] == 1.0
    tests = {t["system_2"]: t for t in b["mcnemar"]}
    assert set(tests) == {"overlap", "majority"} and all(t["delta"] > 0 and t["c"] == 0 for t in tests.values())
