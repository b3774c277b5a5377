"""The three turn rules (engine.SAFE_CATEGORIES): safe, strict and the authors' released evaluation.

``authors`` follows github.com/ashleylew/VISTA: code_base/run_metric.py drops a claim whose stage 2
answer is invalid, evaluation/normalize.py + metrics.py make a turn with an unreadable stage 3 category
unknown and a turn with no claims faithful.
"""

from __future__ import annotations

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.schema import (
    ABSTENTION,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    UNKNOWN,
    UNVERIFIABLE,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
)
from vista_distill.pipeline.engine import (
    RULES,
    ClaimResult,
    EngineConfig,
    run_programs,
    turn_verdict,
    vista_program,
)
from vista_distill.scoring.summary import summarize


def _claim(text: str, category: str | None, failed: str | None = None) -> ClaimResult:
    """A claim as the engine leaves it; ``failed`` = "stage2" or "stage3" for an unparseable answer there."""
    if failed == "stage2":
        return ClaimResult(text, None, stage2={"label": None, "raw": "maybe"}, error="no label in 'maybe'")
    if failed == "stage3":
        return ClaimResult(text, None, stage2={"label": UNVERIFIABLE}, stage3={"label": None, "raw": "hmm"},
                           error="no label in 'hmm'")
    return ClaimResult(text, category, stage2={"label": VERIFIED if category == VERIFIED else UNVERIFIABLE})


def test_all_three_rules_are_listed():
    assert RULES == ("safe", "strict", "authors")


@pytest.mark.parametrize(
    "claims, safe, strict, authors",
    [
        ([("a", VERIFIED, None), ("b", OUT_OF_SCOPE, None)], FAITHFUL, HALLUCINATED, FAITHFUL),
        ([("a", ABSTENTION, None)], FAITHFUL, HALLUCINATED, FAITHFUL),
        ([("a", VERIFIED, None), ("b", CONTRADICTED, None)], HALLUCINATED, HALLUCINATED, HALLUCINATED),
        # the two cases where `authors` and `safe` differ
        ([], UNKNOWN, UNKNOWN, FAITHFUL),
        ([("a", VERIFIED, None), ("b", None, "stage2")], UNKNOWN, UNKNOWN, FAITHFUL),
        ([("a", LACKING_EVIDENCE, None), ("b", None, "stage2")], UNKNOWN, UNKNOWN, HALLUCINATED),
        ([("b", None, "stage2")], UNKNOWN, UNKNOWN, FAITHFUL),       # every claim dropped: no claims left
        # an unreadable stage 3 category stays unknown for the authors too (normalize.py: category None)
        ([("a", VERIFIED, None), ("b", None, "stage3")], UNKNOWN, UNKNOWN, UNKNOWN),
        ([("a", CONTRADICTED, None), ("b", None, "stage3")], UNKNOWN, UNKNOWN, UNKNOWN),
    ],
)
def test_turn_verdict_under_each_rule(claims, safe, strict, authors):
    cs = [_claim(*c) for c in claims]
    assert [turn_verdict(cs, r)[0] for r in ("safe", "strict", "authors")] == [safe, strict, authors]
    for rule in RULES:
        verdict, _, reason = turn_verdict(cs, rule)
        assert (verdict == UNKNOWN) == (reason is not None)


def test_authors_vista_score_leaves_unparseable_claims_out():
    cs = [_claim("a", VERIFIED), _claim("b", LACKING_EVIDENCE), _claim("c", None, "stage2"),
          _claim("d", None, "stage3")]
    assert turn_verdict(cs, "authors")[1] == pytest.approx(1 / 2)
    assert turn_verdict(cs, "safe")[1] == pytest.approx(1 / 2)
    assert turn_verdict([], "authors") == (FAITHFUL, None, None)
    assert turn_verdict([_claim("c", None, "stage2")], "authors") == (FAITHFUL, None, None)


def _conv(turns):
    return Conversation(id="c", source="handmade", turns=turns)


def _scored(text, ref, claims, gold):
    return Turn("assistant", text, reference=ref, gold_label=gold, gold_claims=[Claim(c, lab) for c, lab in claims])


def test_rules_through_the_engine_and_summary():
    # t1: claim B has no label -> the labels teacher answers stage 2 with nothing (a stage 2 failure);
    # t2: claim D is UNVERIFIABLE for stage 2 and then not a stage 3 category (a stage 3 failure);
    # t3: the teacher knows no claims for it (stage 1 answers nothing).
    conv = _conv([Turn("user", "Hi"), _scored("t1", "R1", [("A", VERIFIED), ("B", None)], FAITHFUL),
                  Turn("user", "And?"), _scored("t2", "R2", [("C", VERIFIED), ("D", UNVERIFIABLE)], FAITHFUL),
                  Turn("user", "More?"), Turn("assistant", "t3", reference="R3", gold_label=FAITHFUL)])
    cfg = EngineConfig(stage2="generate", stage3="generate")
    [turns] = run_programs([vista_program(conv, cfg)], LabelsBackend([conv]))
    t1, t2, t3 = turns
    assert t1.claims[1].stage2["label"] is None and t2.claims[1].stage2["label"] == UNVERIFIABLE
    assert t2.claims[1].category is None and not t3.claims
    assert t1.verdicts == {"safe": UNKNOWN, "strict": UNKNOWN, "authors": FAITHFUL}
    assert t2.verdicts == {"safe": UNKNOWN, "strict": UNKNOWN, "authors": UNKNOWN}
    assert t3.verdicts == {"safe": UNKNOWN, "strict": UNKNOWN, "authors": FAITHFUL}
    assert t1.unknown_reason and t3.unknown_reason == "stage 1 returned no claims"
    s = summarize([t.to_dict() for t in turns])
    assert s["by_rule"]["authors"]["verdicts"] == {FAITHFUL: 2, HALLUCINATED: 0, UNKNOWN: 1}
    assert s["by_rule"]["authors"]["coverage"] == pytest.approx(2 / 3)
    assert s["by_rule"]["safe"]["coverage"] == 0.0
