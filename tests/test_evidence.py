"""scoring/evidence.py: the evidence probes (deletion, foreign reference, claim only) built from the engine's own
stage 2 requests, and their metrics, computed by hand on a small case."""

from __future__ import annotations

import json

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.pipeline.engine import EngineConfig, run_programs, vista_program
from vista_distill.pipeline.evidence import support
from vista_distill.pipeline.protocol import Fields
from vista_distill.pipeline.templates import stage2_input, stage_request
from vista_distill.scorer import VistaScorer
from vista_distill.scoring.evidence import evidence_metrics, probe_requests
from vista_distill.scoring.page import write_score_page

V, U = "VERIFIED", "UNVERIFIABLE"


def test_metrics_by_hand():
    rec = lambda probe, **kw: {"probe": probe, **kw}  # noqa: E731
    records = [
        # deletion: 3 of the 4 claims called VERIFIED flip once their support is gone
        *(rec("deletion", label=lab, own_label=V, own_p_verified=0.9, p_verified=0.1, gold=V) for lab in (U, U, V, U)),
        rec("deletion_skipped", reason="single-sentence reference", claims=2),
        # foreign: own 0.9 / 0.6 / 0.3 against foreign 0.2 / 0.6 / 0.5 -> of the 9 pairs, own above in
        # 3 + (2 + a tie) + 1: AUC = 6.5 / 9
        *(rec("foreign", own_label=ol, own_p_verified=o, p_verified=f, label=fl, gold=V)
          for o, f, ol, fl in ((0.9, 0.2, V, U), (0.6, 0.6, V, V), (0.3, 0.5, U, U))),
        # claim only: gold V U U V; empty reference U U U V (3 of 4 right); own reference V U V V (3 of 4)
        *(rec("claim_only", gold=g, label=lab, own_label=ol, own_p_verified=None, p_verified=None)
          for g, lab, ol in ((V, U, V), (U, U, U), (U, U, V), (V, V, V))),
    ]
    m = evidence_metrics(records)
    assert m["deletion_flip_rate"] == 0.75
    assert m["deletion"] == {"claims": 4, "flipped": 3, "not_placed": {"single-sentence reference": 2}}
    assert m["foreign_reference_auc"] == pytest.approx(6.5 / 9)
    assert m["foreign"] == {"claims": 3, "said_verified_own": 2, "said_verified_foreign": 1}
    assert m["claim_only_accuracy"] == 0.75 and m["accuracy"] == 0.75
    assert m["claim_only"] == {"claims": 4, "said_verified": 1}
    empty = evidence_metrics([])
    assert empty["deletion_flip_rate"] is None and empty["foreign_reference_auc"] is None
    assert empty["edit_flip_rate"] is None and empty["strata"]["verified_low_overlap"]["accuracy"] is None


def test_edit_probe_and_overlap_strata_by_hand():
    rec = lambda probe, **kw: {"probe": probe, **kw}  # noqa: E731
    records = [
        # edit: 2 of 3 flip; own 0.9 / 0.8 / 0.4 against edited 0.1 / 0.85 / 0.2
        *(rec("edit", gold=V, own_label=ol, own_p_verified=o, label=lab, p_verified=e)
          for o, e, ol, lab in ((0.9, 0.1, V, U), (0.8, 0.85, V, V), (0.4, 0.2, U, U))),
        rec("edit_skipped", reason="no value or verb of the claim to change", claims=5),
        # strata: VERIFIED with low overlap (2: one right), unverifiable with high overlap (1: wrong); others ignored
        *(rec("claim_only", gold=g, own_label=ol, overlap=ov, label=U, own_p_verified=None, p_verified=None)
          for g, ol, ov in ((V, V, 0.2), (V, U, 0.0), (V, V, 0.9), (U, V, 0.6), (U, U, 0.1), (V, V, None))),
    ]
    m = evidence_metrics(records)
    assert m["edit_flip_rate"] == pytest.approx(2 / 3)
    assert m["edit"] == {"claims": 3, "flipped": 2, "both_right": 1,
                         "not_edited": {"no value or verb of the claim to change": 5}}
    # own scores above edited ones in 7 of the 9 pairs (0.9 > all; 0.8 > 0.1, 0.2; 0.4 > 0.1, 0.2)
    assert m["edit_auc"] == pytest.approx(7 / 9)
    assert m["strata"] == {"verified_low_overlap": {"claims": 2, "accuracy": 0.5},
                           "unverifiable_high_overlap": {"claims": 1, "accuracy": 0.0}}


def test_the_overlap_rule_fails_the_edit_probe_and_both_strata():
    """The rule passes the deletion probe by construction and fails the edit probe and the strata by construction:
    the measures say whether a system reads, not whether it counts words."""
    import random

    from vista_distill.backends.cheap_baselines import BaselineBackend
    from vista_distill.pipeline.templates import get_template
    from vista_distill.scoring.evidence import edited_reference

    ref = "The Louvre opened in 1793. It holds about 380,000 objects."
    claim = "The Louvre opened in 1793."
    edited, how = edited_reference(claim, ref, random.Random(0))
    assert how["old"] in claim and edited != ref and "380,000 objects" in edited
    t = get_template("stage2", "compact")
    ask = lambda r, c: stage_request(t, Fields(reference=r, claim=c), labels=t.labels)  # noqa: E731
    rule = BaselineBackend("overlap")
    own, after_edit, paraphrased = rule.run([ask(ref, claim), ask(edited, claim),
                                              ask(ref, "The famous Paris museum first admitted visitors in 1793.")])
    assert own.label == V and after_edit.label == V   # most words stay: the rule still says VERIFIED
    assert paraphrased.label == U and paraphrased.probs[V] < 0.5


def _given(sample):
    cfg = EngineConfig(claims="gold")
    return run_programs([vista_program(c, cfg) for c in sample], LabelsBackend(sample))


def test_probes_change_only_the_reference_of_the_engines_requests(sample_path):
    sample = read_conversations(sample_path)
    results = _given(sample)
    records, requests = probe_requests(results, seed=0)
    probes = [r for r in records if not r["probe"].endswith("_skipped")]
    assert len(probes) == len(requests)
    turns = {(r.conversation_id, r.turn_index): r for conv in results for r in conv}
    references = {r.reference for r in turns.values() if r.scored and r.reference}
    gold_claims = sum(len(r.gold_claims or []) for r in turns.values() if r.scored and r.reference)
    assert sum(r["probe"] == "claim_only" for r in probes) == gold_claims
    for rec, req in zip(probes, requests):
        res = turns[(rec["conversation_id"], rec["turn_index"])]
        own_input = next(c.input for c in res.calls if c.stage == "stage2" and c.claim_index == rec["claim_index"])
        own_req = next(c.request for c in res.calls if c.stage == "stage2" and c.claim_index == rec["claim_index"])
        text = req.messages[-1]["content"]
        # the same prompt, background and claim; only the REFERENCE TEXT differs
        assert req.messages[:-1] == own_req.messages[:-1] and req.labels == own_req.labels
        assert text.split("REFERENCE TEXT:\n")[0] == own_input.split("REFERENCE TEXT:\n")[0]
        assert text.endswith("\n\nCLAIM:\n" + rec["claim"]) and text != own_input
        reference = text.split("REFERENCE TEXT:\n", 1)[1].rsplit("\n\nCLAIM:\n", 1)[0]
        if rec["probe"] == "edit":
            # one sentence changed: the reference keeps most of its words, the claim's value or verb is gone
            assert rec["gold"] == V and reference != res.reference
            assert reference.replace(rec["edit"]["new"], rec["edit"]["old"], 1) == res.reference \
                or rec["edit"]["rule"] == "negation"
        elif rec["probe"] == "deletion":
            assert rec["own_label"] == V   # only claims the system calls VERIFIED
            sup, _ = support(rec["claim"], res.reference)
            assert reference == sup.remainder and all(s not in reference for s in rec["removed"])
            if res.background_size == 0:   # what the engine itself would send with that reference
                assert text == stage2_input([], sup.remainder, rec["claim"])
        elif rec["probe"] == "foreign":
            assert rec["gold"] == V and reference in references and reference != res.reference
        else:
            assert reference == ""
    assert {r["probe"] for r in probes} >= {"deletion", "foreign", "claim_only"}
    # seeded: the same foreign references again
    assert probe_requests(results, seed=0)[1] == requests


def test_scorer_reports_the_evidence_metrics_from_a_transformers_backend(sample_path, tiny_smollm2, tmp_path):
    from vista_distill.backends.transformers import TransformersBackend

    sample = read_conversations(sample_path)
    # the probes are what is tested, not what is said: the tiny random SmolLM2, compact prompts and short budgets
    backend = TransformersBackend(str(tiny_smollm2), dtype="float32", batch_size=8)
    result = VistaScorer(backend=backend, style="compact",
                         max_new_tokens={"stage1": 32, "stage3": 16}).score(sample, evidence=True)
    ev = result.summary["evidence"]
    assert set(ev) >= {"deletion_flip_rate", "foreign_reference_auc", "claim_only_accuracy", "accuracy"}
    assert ev["claim_only"]["claims"] == sum(len(t.gold_claims or []) for c in sample for t in c.turns
                                             if t.role == "assistant" and t.reference)
    assert 0 <= ev["foreign_reference_auc"] <= 1 and 0 <= ev["claim_only_accuracy"] <= 1
    probes = [r for r in result.evidence_records if r["probe"] in ("deletion", "foreign", "claim_only")]
    assert all(r["label"] in (V, U) and 0 <= r["p_verified"] <= 1 for r in probes)
    assert ev["deletion"]["claims"] == sum(r["probe"] == "deletion" for r in probes)
    out, summary = result.write(tmp_path / "s.jsonl")
    write_score_page(result, out)
    assert json.loads(summary.read_text())["evidence"] == ev
    lines = (tmp_path / "s.evidence.jsonl").read_text().splitlines()
    assert len(lines) == len(result.evidence_records)
    page = (tmp_path / "s.report.html").read_text()
    assert "Does it read its evidence?" in page and "own vs foreign reference AUC" in page
    # without human claims, or when not asked: no probes
    assert "evidence" not in VistaScorer(backend=backend, style="compact",
                                         max_new_tokens={"stage1": 32, "stage3": 16}).score(sample[:1]).summary
