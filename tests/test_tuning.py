"""eval.tune_on (eval/tuning.py): stage 2 fixed and tuned side by side, the cut-off chosen on a dev split of other
dialogues and applied to the test's human claims; a dev split that shares a dialogue with the test is refused."""

from __future__ import annotations

import json

import pytest
from helpers import EVAL_RECIPE, ROOT, eval_overrides, identity_adapters

from vista_distill.config import load_recipe
from vista_distill.data.io import read_conversations
from vista_distill.eval.errors import EvalError
from vista_distill.eval.run import run_eval
from vista_distill.eval.tuning import check_apart, choose_threshold, claim_scores
from vista_distill.scoring.calibrate import THRESHOLDS

DEV = ROOT / "data" / "samples" / "faithdial_models_validation.jsonl"


def test_the_cut_off_is_the_most_accurate_on_the_dev_claims_ties_nearest_half() -> None:
    scores = [(True, 0.9, True), (True, 0.35, False), (False, 0.3, False), (False, 0.1, False)]
    t, acc = choose_threshold(scores)
    assert acc == 1.0 and 0.3 <= t < 0.35 and t in THRESHOLDS   # every cut-off in [0.30, 0.35) is right on all four
    assert choose_threshold([(True, 0.5, True), (False, 0.5, True)]) == (0.5, 0.5)   # a tie over the whole grid
    with pytest.raises(ValueError, match="no scored claims"):
        choose_threshold([])


def test_eval_reports_fixed_and_tuned_with_the_dev_split_apart(tmp_path, sample_path, tiny_smollm2):
    """On the tiny random SmolLM2 (the tuning is tested, not what the model says): the student and the overlap rule
    tuned on 6 FaithDial validation dialogues, applied to the sample's human claims."""
    identity_adapters(tmp_path / "checkpoints", tiny_smollm2)
    ov = [*eval_overrides(tmp_path), f"student.model={tiny_smollm2}", "eval.given_claims=true", "eval.evidence=false",
          "pipeline.max_new_tokens={stage1: 16, stage3: 8}",
          f"eval.tune_on=[{{benchmark: file, source: {DEV}, n: 6}}]"]
    res = run_eval(load_recipe(EVAL_RECIPE, ov), input_path=str(sample_path), limit=2, output_dir=tmp_path / "out",
                   systems=["student", "overlap"])
    tuned = res.results["tuned"]
    assert tuned["dev"]["conversations"] == 6 and set(tuned["systems"]) == {"student", "overlap"}
    for name, s in tuned["systems"].items():
        dev = [json.loads(x) for x in (res.out_dir / "records" / f"{name}.tune_on.jsonl").read_text().splitlines()]
        dev_scores = claim_scores(dev)
        assert len(dev_scores) == s["dev_claims"] > 0 and s["threshold"] in THRESHOLDS
        assert choose_threshold(dev_scores) == (s["threshold"], s["dev_accuracy_tuned"])
        test_scores = claim_scores(res.systems[name].given_records)
        assert s["test_claims"] == len(test_scores) > 0
        assert s["tuned"] == pytest.approx(sum((p > s["threshold"]) == g for g, p, _ in test_scores) / len(test_scores))
        # fixed is the stage 2 accuracy the claim-level section reports for the same claims
        given = res.results["given_claims"]["systems"][name]["overall"]
        assert s["fixed"] == pytest.approx(given["binary_accuracy"])
        assert 0 <= s["pvalue"] <= 1
    # both tuned, paired over the same human claims: the student against the tuned overlap rule
    (pair,) = tuned["student_vs_tuned"]
    assert pair["system_2"] == "overlap" and pair["n"] == tuned["systems"]["student"]["test_claims"]
    assert pair["delta"] == pytest.approx(tuned["systems"]["student"]["tuned"] - tuned["systems"]["overlap"]["tuned"])
    report = (res.out_dir / "report.md").read_text()
    assert "## Stage 2 fixed and tuned" in report and "Both tuned: the student against each rule" in report
    # the dev split is never the test, and it tunes on human claims only
    same = run_eval(load_recipe(EVAL_RECIPE, [*ov[:-1], f"eval.tune_on=[{{benchmark: file, source: {sample_path}}}]"]),
                    input_path=str(sample_path), limit=2, output_dir=tmp_path / "same", systems=["overlap"])
    dev = same.results["tuned"]["dev"]   # the two test dialogues (and any sharing their references) left out
    assert dev["left_out_shared_with_test"] >= 2 and dev["conversations"] + dev["left_out_shared_with_test"] == \
        len(read_conversations(sample_path))
    with pytest.raises(EvalError, match="eval.given_claims"):
        run_eval(load_recipe(EVAL_RECIPE, [*ov, "eval.given_claims=false"]), input_path=str(sample_path), limit=2,
                 output_dir=tmp_path / "none", systems=["overlap"])


def test_dev_dialogues_sharing_the_test_are_left_out_and_a_dev_split_that_is_the_test_refused(sample_path):
    convs = read_conversations(sample_path)
    test = convs[:1]
    refs = {t.reference for t in test[0].turns if t.reference}
    kept = check_apart(convs, test)
    assert kept and all(c.id != test[0].id and not refs & {t.reference for t in c.turns} for c in kept)
    assert len(kept) == sum(not refs & {t.reference for t in c.turns} for c in convs[1:])
    with pytest.raises(EvalError, match=r"shares 1 dialogue"):
        check_apart(test, test)
