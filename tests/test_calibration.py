"""Calibration to a user's dev set (issue 61): the cross-validated choice per stage on claim rows, the file kept
beside the adapters and its errors, and the stage 3 wording rule. The fit end to end on a real student, with the
calibration applied in process and on llama.cpp, is in tests/test_server_student.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vista_distill.backends.calibration import Calibration, apply_calibration, available, calibration_path
from vista_distill.backends.cheap_baselines import BaselineBackend, wording_category
from vista_distill.backends.evidence_head import EvidenceHead
from vista_distill.backends.label_prior import LabelPrior
from vista_distill.data.io import SchemaError, read_conversations
from vista_distill.scoring.calibrate import (
    calibrate_stage2,
    calibrate_stage3,
    dev_fingerprint,
    fit_calibration,
    fit_shift,
    summary_rows,
)

LABELS3 = ["OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION"]


def _stage2_rows(n_conv: int = 6, per: int = 6, seed: int = 0, informative: bool = True) -> list[dict]:
    """Claims whose word overlap decides them (informative) while the adapter's own label is always VERIFIED."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_conv):
        for k in range(per):
            verified = bool((g + k) % 2)
            overlap = (0.8 if verified else 0.2) + rng.normal(0, 0.05) if informative else rng.uniform()
            rows.append({"group": f"c{g}", "text": "x", "human": "VERIFIED" if verified else "LACKING EVIDENCE",
                         "stage2": "VERIFIED", "features": {"margin": 1.0 + rng.normal(0, 0.1),
                                                            "pmi": rng.normal(0, 0.1), "overlap": overlap},
                         "stage3": None, "stage3_probs": None})
    return rows


def test_stage2_refit_is_chosen_when_the_dev_claims_teach_it_and_scored_out_of_fold():
    out = calibrate_stage2(_stage2_rows(), folds=3)
    cv = out["cross_validated"]
    assert cv["as trained"]["accuracy"] == 0.5 and out["chosen"] in ("head refit", "head refit + threshold")
    assert cv[out["chosen"]]["accuracy"] > 0.9 and out["folds"] == 3 and out["conversations"] == 6
    assert isinstance(out["head"], EvidenceHead) and out["head"].w_overlap > 0
    assert out["mcnemar_chosen_vs_as_trained"]["p_value"] < 0.01
    assert set(out["rules"]) == {"overlap rule (0.5)", "overlap rule, tuned"}
    vs_rule = out["mcnemar_chosen_vs_overlap_tuned"]   # paired on the same 36 claims, out of fold on both sides
    gap = cv[out["chosen"]]["accuracy"] - out["rules"]["overlap rule, tuned"]["accuracy"]
    assert vs_rule["only_first_right"] - vs_rule["only_second_right"] == round(36 * gap)
    assert np.sum(out["confusion_as_trained"]["rows_human_cols_predicted"]) == 36


def test_stage2_keeps_training_when_nothing_beats_it_and_says_why_when_too_small():
    rows = _stage2_rows(informative=False)
    for r in rows:   # the adapter is already right on every claim: no refit can do better
        r["stage2"] = r["human"] if r["human"] == "VERIFIED" else "UNVERIFIABLE"
    out = calibrate_stage2(rows, folds=3)
    assert out["chosen"] == "as trained" and "head" not in out
    small = calibrate_stage2(_stage2_rows(n_conv=1, per=4))
    assert "too few claims: 4" in small["kept"]


def test_fit_shift_recovers_an_under_scored_label():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 200)
    logp = rng.normal(0, 0.3, (200, 4))
    logp[np.arange(200), y] += 2.0
    logp[:, 0] -= 3.0   # OUT-OF-SCOPE scored 3 nats too low: the student never says it
    assert (np.argmax(logp, axis=1) == 0).sum() == 0
    shift = fit_shift(logp, y)
    moved = np.argmax(logp + shift, axis=1)
    assert (moved == y).mean() > 0.9 and (moved == 0).sum() > 30


def _stage3_rows(helpful: bool) -> list[dict]:
    rng = np.random.default_rng(2)
    rows = []
    for i in range(48):
        human = LABELS3[[0, 2][i % 2]]
        lp = {lab: -2.0 + rng.normal(0, 0.2) for lab in LABELS3}
        lp[human] += 1.0
        if helpful:
            lp["OUT-OF-SCOPE"] -= 3.0
        probs = dict(zip(LABELS3, np.exp(list(lp.values())) / np.exp(list(lp.values())).sum()))
        rows.append({"group": f"c{i // 4}", "text": "The speaker loves owls." if human == "OUT-OF-SCOPE" else "x",
                     "human": human, "stage2": "UNVERIFIABLE", "features": {}, "stage3": None,
                     "stage3_probs": probs})
    return rows


@pytest.mark.parametrize("helpful", [True, False])
def test_stage3_shift_chosen_only_when_it_does_better_out_of_fold(helpful):
    out = calibrate_stage3(_stage3_rows(helpful), folds=4)
    assert out["chosen"] == ("label shift" if helpful else "as trained")
    assert ("shift" in out) == helpful
    assert out["rules"]["wording rule"]["accuracy"] == 1.0   # the rows' wording is what the rule reads
    assert np.sum(out["confusion_chosen"]) == 48 and out["labels"] == LABELS3


def test_fit_calibration_adds_the_shift_to_the_prior_stage3_ran_with(sample_path):
    records = []
    for r in _stage3_rows(True):
        records.append({"conversation_id": r["group"], "gold_claims": [{"text": r["text"], "label": r["human"]}],
                        "claims": [{"text": r["text"], "stage2": {"label": "UNVERIFIABLE"},
                                    "stage3": {"label": None, "probs": r["stage3_probs"]}}]})
    dev = dev_fingerprint(read_conversations(sample_path), sample_path)
    cal = fit_calibration(records, "mine", dev, folds=4, stage3_prior=LabelPrior({"OUT-OF-SCOPE": 0.5}))
    fitted = cal.fitted["stage3"]["shift"]
    assert cal.stage3.shift["OUT-OF-SCOPE"] == pytest.approx(0.5 + fitted["OUT-OF-SCOPE"])
    assert cal.stage2 is None and "too few claims" in cal.fitted["stage2"]["kept"]
    assert dev["claims"] == 19 and dev["conversations"] == 3 and len(dev["sha256"]) == 64
    rows = summary_rows(cal)
    assert rows[0][0] == "stage2" and "kept" in rows[0][1]
    assert ("stage3", "label shift", rows[2][2], rows[2][3], "chosen") == rows[2]
    with pytest.raises(ValueError, match="no human claims"):
        fit_calibration([], "mine", dev)


def test_the_file_round_trips_beside_the_adapters_and_applies_to_a_backend(tmp_path):
    head = EvidenceHead(1.0, 2.0, -0.5, {"on": "dev"}, 0.3, threshold=0.7)
    cal = Calibration("my-domain", head, LabelPrior({"OUT-OF-SCOPE": 1.5}), {"dev": {"claims": 3}})
    path = cal.save(tmp_path)
    assert path == calibration_path(tmp_path, "my-domain") == tmp_path / "calibrations" / "my-domain.json"
    back = Calibration.load(tmp_path, "my-domain")
    assert back.stage2 == head and back.stage3.shift == {"OUT-OF-SCOPE": 1.5} and available(tmp_path) == ["my-domain"]
    assert head.says_verified(0.71) and not head.says_verified(0.69)
    pmi = BaselineBackend("overlap")
    with pytest.raises(TypeError, match="applies to the student"):
        apply_calibration(pmi, back)
    pmi.heads, pmi.priors = {}, {}
    apply_calibration(pmi, back)
    assert pmi.heads["stage2"] == head and pmi.priors["stage3"].shift == {"OUT-OF-SCOPE": 1.5}


@pytest.mark.parametrize("content, field", [
    ('{"name": "x", "stage2": {"w_margin": 1}, "stage3": null}', "stage2"),
    ('{"name": "x", "stage2": {"w_margin": 1, "w_pmi": 1, "bias": 0, "threshold": 1.5}}', "stage2"),
    ('{"name": "x", "stage3": {"shift": {"OUT-OF-SCOPE": "big"}}}', "stage3"),
    ('[1, 2]', None), ('{"name": ', None)])
def test_a_damaged_calibration_names_its_file_and_field(tmp_path, content, field):
    (tmp_path / "calibrations").mkdir()
    (tmp_path / "calibrations" / "bad.json").write_text(content)
    with pytest.raises(SchemaError) as err:
        Calibration.load(tmp_path, "bad")
    assert "bad.json" in str(err.value) and (field is None or field in str(err.value))


def test_missing_and_unsafe_names_are_refused(tmp_path):
    Calibration("a").save(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no calibration 'b' .*there: a\).*--calibration b"):
        Calibration.load(tmp_path, "b")
    for bad in ("../x", "", "a/b", "x" * 65):
        with pytest.raises(ValueError, match="calibration name"):
            calibration_path(tmp_path, bad)
    assert json.loads((tmp_path / "calibrations" / "a.json").read_text())["stage2"] is None


@pytest.mark.parametrize("claim, category", [
    ("The speaker loves owls.", "OUT-OF-SCOPE"), ("I think the Nile is lovely.", "OUT-OF-SCOPE"),
    ("Have you ever been to Paris?", "OUT-OF-SCOPE"), ("I'm not sure when it was built.", "ABSTENTION"),
    ("The wizard does not know who won.", "ABSTENTION"), ("Everest is 9,000 m high.", "LACKING EVIDENCE"),
    ("Paris has a big zoo.", "LACKING EVIDENCE")])
def test_the_stage3_wording_rule(claim, category):
    assert wording_category(claim) == category
