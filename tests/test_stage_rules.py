"""results.json's ``stage_rules`` (eval/stage_rules.py): each stage beside its cheap rule, on records built by hand
so every figure can be counted here; the section in a real eval run is checked in tests/test_eval_report.py."""

from __future__ import annotations

import pytest

from vista_distill.data.schema import Conversation
from vista_distill.eval.stage_rules import (
    decomposed_turns,
    stage_rule_rows,
    stage_rules_markdown,
    stage_rules_section,
)
from vista_distill.eval.systems import SystemRun
from vista_distill.scoring.claim_matching import ClaimMatcher

REFERENCE = "The Eiffel Tower is in Paris. It was completed in 1889."
TEXT = "The Eiffel Tower is in Paris. It was completed in 1889. I think it is the most beautiful building."
GOLD = [{"text": "The Eiffel Tower is in Paris.", "label": "VERIFIED"},
        {"text": "It was completed in 1889.", "label": "VERIFIED"},
        {"text": "I think it is the most beautiful building.", "label": "OUT-OF-SCOPE"},
        {"text": "It was painted red in 2020.", "label": "LACKING EVIDENCE"}]


def _claim(text: str, category: str) -> dict:
    return {"text": text, "category": category, "stage2": {"label": category},
            "stage3": None if category == "VERIFIED" else {"label": category}}


def _record(claims: list[dict], gold: list[dict]) -> dict:
    return {"conversation_id": "c1", "source": "sample", "turn_index": 1, "text": TEXT, "reference": REFERENCE,
            "scored": True, "claims": claims, "gold_claims": gold, "verdicts": {}}


def test_each_stage_against_its_rule_counted_by_hand() -> None:
    # whole pipeline: the student's two claims match two of the four human claims; the splitter's three match three
    whole = _record([_claim("The Eiffel Tower is in Paris.", "VERIFIED"), _claim("Paris is in France.", "VERIFIED")],
                    GOLD)
    # human claims given: stage 2 right on 3 of 4 (it calls the opinion VERIFIED); the overlap rule right on 4 of 4
    given = _record([_claim(GOLD[0]["text"], "VERIFIED"), _claim(GOLD[1]["text"], "VERIFIED"),
                     _claim(GOLD[2]["text"], "VERIFIED"), _claim(GOLD[3]["text"], "CONTRADICTED")], GOLD)
    runs = {"student": SystemRun("student", records=[whole], given_records=[given]),
            "overlap": SystemRun("overlap", records=[whole])}     # a rule itself: not compared with the rules
    conversations = [Conversation.from_dict(
        {"id": "c1", "source": "sample", "turns": [{"role": "user", "text": "Tell me about it."},
                                {"role": "assistant", "text": TEXT, "reference": REFERENCE,
                                 "gold_claims": GOLD}]})]
    assert decomposed_turns(conversations) == {("c1", 1)}
    s = stage_rules_section(runs, conversations, ClaimMatcher(use_embeddings=False), "exact")
    assert set(s["stage1"]["systems"]) == {"student"}
    st = s["stage1"]["systems"]["student"]
    assert (st["matched"], st["human_claims"], st["predicted_claims"]) == (1, 4, 2)
    assert st["f1"] == pytest.approx(2 * 0.25 * 0.5 / 0.75)
    assert (st["rule"]["matched"], st["rule"]["predicted_claims"]) == (3, 3)
    assert st["rule"]["f1"] == pytest.approx(2 * 0.75 * 1.0 / 1.75)
    s2 = s["stage2"]["systems"]["student"]
    assert (s2["n"], s2["system_accuracy"], s2["rule_accuracy"], s2["b"], s2["c"]) == (4, 0.75, 1.0, 0, 1)
    # stage 3: the one human-unverifiable claim the student sent there (the painted claim), called CONTRADICTED;
    # the wording rule says LACKING EVIDENCE
    s3 = s["stage3"]["systems"]["student"]
    assert (s3["n"], s3["system_accuracy"], s3["rule_accuracy"]) == (1, 0.0, 1.0)
    rows = stage_rule_rows(s)
    assert [r[:3] for r in rows] == [("1 claims F1", "student", 4), ("2 verified?", "student", 4),
                                     ("3 category", "student", 1)]
    assert rows[0][-1] is None and 0 < rows[1][-1] <= 1
    report = "\n".join(stage_rules_markdown({"stage_rules": s}))
    assert "| 2 verified? | student | 4 | 75.0 | 100.0 | -25.0 | 1.0000 |" in report


def test_no_decomposition_says_why_and_rules_alone_give_no_section() -> None:
    rec = _record([_claim(TEXT, "VERIFIED")], [{"text": TEXT, "label": "VERIFIED"}])
    conversations = [Conversation.from_dict(
        {"id": "c1", "source": "sample", "turns": [{"role": "user", "text": "Tell me about it."},
                                {"role": "assistant", "text": TEXT, "reference": REFERENCE,
                                 "gold_claims": [{"text": TEXT, "label": "VERIFIED"}],
                                 "meta": {"claims_complete": False}}]})]
    s = stage_rules_section({"student": SystemRun("student", records=[rec], given_records=[rec])}, conversations,
                            ClaimMatcher(use_embeddings=False), "exact")
    assert s["stage1"]["systems"] == {} and "full human decomposition" in s["stage1"]["reason"]
    assert s["stage2"]["systems"]["student"]["n"] == 1
    assert stage_rules_section({"overlap": SystemRun("overlap", records=[rec])}, conversations,
                               ClaimMatcher(use_embeddings=False), "exact") is None
