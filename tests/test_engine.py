"""Engine semantics on hand-made conversations, answered by the human-labels teacher."""

from __future__ import annotations

import copy

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.data.schema import (
    ABSTENTION,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    UNKNOWN,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
)
from vista_distill.pipeline.engine import ClaimResult, EngineConfig, run_programs, turn_verdict, vista_program
from vista_distill.pipeline.protocol import Request, Response
from vista_distill.scorer import VistaScorer


class Recording:
    """Wraps a real backend and keeps every request it was sent, with the batch it came in."""

    def __init__(self, inner):
        self.inner, self.batches, self.name = inner, [], "recording"
        self.stats, self.progress = {}, None
        self.served, self.hardware = inner.served, inner.hardware

    def describe(self) -> dict:
        return {"backend": self.name, "inner": self.inner.describe()}

    def run(self, requests: list[Request]) -> list[Response]:
        self.batches.append(list(requests))
        return self.inner.run(requests)

    @property
    def requests(self) -> list[Request]:
        return [r for b in self.batches for r in b]


def _conv(turns, background=()):
    return Conversation(id="c", source="handmade", turns=turns, background=list(background))


def _scored(text, ref, claims, gold=None):
    return Turn("assistant", text, reference=ref, gold_label=gold, gold_claims=[Claim(c, lab) for c, lab in claims])


@pytest.fixture
def sample(sample_path):
    return read_conversations(sample_path)


def test_background_grows_with_verified_out_of_scope_and_context_claims(sample):
    conv = sample[0]  # scored turn, context (N/A) turn, scored turn
    conv.turns[3].gold_claims = [Claim("The company of Gustave Eiffel built the Eiffel Tower.")]
    backend = Recording(LabelsBackend([conv]))
    (turns,) = run_programs([vista_program(conv, EngineConfig())], backend)
    assert [t.scored for t in turns] == [True, False, True]
    assert [t.background_size for t in turns] == [0, 3, 4]  # 2 verified + 1 out-of-scope, then +1 context claim
    last_stage2 = [r for r in backend.requests if r.stage == "stage2"][-1]
    assert last_stage2.fields.background == (
        "The Eiffel Tower is in Paris.",
        "The Eiffel Tower was completed in 1889.",
        "The assistant thinks the Eiffel Tower is the most beautiful building in the world.",
        "The company of Gustave Eiffel built the Eiffel Tower.",
    )
    assert last_stage2.messages[-1]["content"].startswith(   # the fields, rendered once by the pipeline
        "BACKGROUND KNOWLEDGE:\n1. The Eiffel Tower is in Paris.\n2. The Eiffel Tower was completed in 1889.\n")
    first_stage2 = [r for r in backend.requests if r.stage == "stage2"][0]
    assert first_stage2.fields.background == ()
    assert first_stage2.messages[-1]["content"].startswith("BACKGROUND KNOWLEDGE:\nN/A\n\nREFERENCE TEXT:\n")


def test_context_turn_is_not_verified_or_scored(sample):
    conv = sample[0]
    conv.turns[3].gold_claims = [Claim("The company of Gustave Eiffel built the Eiffel Tower.")]
    backend = Recording(LabelsBackend([conv]))
    (turns,) = run_programs([vista_program(conv, EngineConfig())], backend)
    context = turns[1]
    assert context.verdicts == {} and context.claims[0].stage2 is None
    stage2_claims = {
        r.fields.claim for r in backend.requests if r.stage == "stage2"
    }
    assert "The company of Gustave Eiffel built the Eiffel Tower." in stage2_claims  # asked again in the last turn only
    assert sum(r.stage == "stage1" for r in backend.requests) == 3


def test_abstention_lacking_evidence_and_contradicted_claims_stay_out_of_background():
    conv = _conv([
        Turn("user", "Tell me about bees."),
        _scored("t1", "R1", [("A", VERIFIED), ("B", ABSTENTION), ("C", LACKING_EVIDENCE), ("D", CONTRADICTED),
                             ("E", OUT_OF_SCOPE)]),
        Turn("user", "More?"),
        _scored("t2", "R2", [("F", VERIFIED)]),
    ], background=["Initial fact."])
    backend = Recording(LabelsBackend([conv]))
    (turns,) = run_programs([vista_program(conv, EngineConfig())], backend)
    last = [r for r in backend.requests if r.stage == "stage2"][-1]
    assert last.fields.background == ("Initial fact.", "A", "E")
    stage3_claims = [
        r.fields.claim for r in backend.requests if r.stage == "stage3"
    ]
    assert stage3_claims == ["B", "C", "D", "E"]  # only UNVERIFIABLE claims reach stage 3
    assert [c.category for c in turns[0].claims] == [VERIFIED, ABSTENTION, LACKING_EVIDENCE, CONTRADICTED, OUT_OF_SCOPE]


@pytest.mark.parametrize(
    "categories, safe, strict",
    [
        ([VERIFIED, VERIFIED], FAITHFUL, FAITHFUL),
        ([VERIFIED, OUT_OF_SCOPE], FAITHFUL, HALLUCINATED),
        ([ABSTENTION], FAITHFUL, HALLUCINATED),
        ([VERIFIED, LACKING_EVIDENCE], HALLUCINATED, HALLUCINATED),
        ([OUT_OF_SCOPE, CONTRADICTED], HALLUCINATED, HALLUCINATED),
        ([VERIFIED, None], UNKNOWN, UNKNOWN),
        ([], UNKNOWN, UNKNOWN),
    ],
)
def test_turn_rules(categories, safe, strict):
    claims = [ClaimResult(f"c{i}", category=c, error=None if c else "unparseable") for i, c in enumerate(categories)]
    assert turn_verdict(claims, "safe")[0] == safe
    assert turn_verdict(claims, "strict")[0] == strict


def test_vista_score_is_share_of_safe_claims():
    claims = [ClaimResult("a", VERIFIED), ClaimResult("b", OUT_OF_SCOPE), ClaimResult("c", LACKING_EVIDENCE),
              ClaimResult("d", ABSTENTION)]
    assert turn_verdict(claims, "safe")[1] == pytest.approx(3 / 4)
    assert turn_verdict(claims, "strict")[1] == pytest.approx(1 / 4)


def test_unparseable_category_gives_unknown_with_reason_and_lowers_coverage():
    conv = _conv([Turn("user", "Hi"), _scored("t1", "R1", [("A", VERIFIED), ("B", None)], gold=FAITHFUL),
                  Turn("user", "And?"), _scored("t2", "R2", [("C", VERIFIED)], gold=FAITHFUL)])
    result = VistaScorer(backend=LabelsBackend([conv]), stage2="generate").score([conv])
    first, second = result.records
    assert first["verdicts"] == {"safe": UNKNOWN, "strict": UNKNOWN, "authors": FAITHFUL}
    assert first["unknown_reason"] == "claim 'B': empty output (no gold label for this request)"
    assert first["claims"][1]["stage2"]["raw"] == ""  # raw output kept
    assert second["verdicts"]["safe"] == FAITHFUL
    s = result.summary
    assert s["coverage"] == 0.5
    assert s["by_rule"]["safe"]["gold"] == {"n_gold": 2, "n": 1, "coverage": 0.5, "accuracy": 1.0,
                                            "precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert s["unknown"][0]["turn_index"] == 1


def test_summary_on_sample_with_gold_labels_matches_authors_rule(sample):
    # With the human labels as teacher, the safe-rule verdicts reproduce the gold turn labels exactly.
    result = VistaScorer(backend=LabelsBackend(sample)).score(sample)
    scored = [r for r in result.records if r["scored"]]
    assert [r["verdicts"]["safe"] for r in scored] == [r["gold_label"] for r in scored]
    assert result.summary["by_rule"]["safe"]["gold"]["accuracy"] == 1.0
    assert result.summary["by_rule"]["strict"]["gold"]["accuracy"] < 1.0
    cats = result.summary["categories"]["counts"]
    assert cats[CONTRADICTED] == 2 and cats[ABSTENTION] == 2
    assert set(result.summary["per_conversation"]) == {c.id for c in sample}
    assert sum(result.summary["categories"]["proportions"].values()) == pytest.approx(1.0)


def test_batched_rounds_group_stages_across_conversations(sample):
    convs = copy.deepcopy(sample)
    backend = Recording(LabelsBackend(convs))
    batched = run_programs([vista_program(c, EngineConfig()) for c in convs], backend, batched=True)
    first_round_stages = {r.stage for r in backend.batches[0]}
    assert first_round_stages == {"stage1"} and len(backend.batches[0]) == 7  # every assistant turn at once
    assert all(len({r.stage for r in b}) == 1 for b in backend.batches)
    assert max(len(b) for b in backend.batches if b[0].stage == "stage2") > 4  # claims of several conversations
    single_backend = Recording(LabelsBackend(convs))
    single = run_programs([vista_program(c, EngineConfig()) for c in convs], single_backend, batched=False)
    assert all(len(b) == 1 for b in single_backend.batches)
    assert [[t.to_dict() for t in c] for c in batched] == [[t.to_dict() for t in c] for c in single]
    assert sorted(map(repr, backend.requests)) == sorted(map(repr, single_backend.requests))


def test_labels_teacher_answers_a_repeated_turn_with_all_its_annotated_claims():
    # FineDialFact shape: one record per annotated fact, the same response in each record
    ref = "Mount Etna is an active stratovolcano in Sicily."
    convs = [_conv([Turn("user", "Tell me about Etna."),
                    _scored("Etna is an active volcano in Sicily. It last erupted in 1200.", ref, [(c, lab)])])
             for c, lab in (("Etna is an active volcano.", "VERIFIED"), ("Etna last erupted in 1200.", "CONTRADICTED"))]
    (turns,) = run_programs([vista_program(convs[0], EngineConfig())], LabelsBackend(convs))
    claims = turns[-1].claims
    assert [c.text for c in claims] == ["Etna is an active volcano.", "Etna last erupted in 1200."]
    assert [c.category for c in claims] == ["VERIFIED", "CONTRADICTED"]


def test_given_claims_skip_stage1_for_turns_with_human_claims(sample):
    conv = sample[0]   # scored turn, context (N/A) turn without human claims, scored turn
    backend = Recording(LabelsBackend([conv]))
    # max_claims limits what stage 1 returns, never the human claims
    (turns,) = run_programs([vista_program(conv, EngineConfig(claims="gold", max_claims=1))], backend)
    assert sum(r.stage == "stage1" for r in backend.requests) == 1            # the context turn only
    for t in turns:
        if t.scored:
            gold = conv.turns[t.turn_index].gold_claims
            assert [c.text for c in t.claims] == [c.text for c in gold] and t.stage1_raw == ""
            assert [c.category for c in t.claims] == [c.label for c in gold]   # the labels teacher answers stage 2-3
            assert not [c for c in t.calls if c.stage == "stage1"]
    assert len(turns[-1].claims) > 1
    model_turns = run_programs([vista_program(conv, EngineConfig(max_claims=1))], LabelsBackend([conv]))[0]
    assert len(model_turns[-1].claims) == 1 and model_turns[-1].claims_dropped["over_max_claims"] > 0
    with pytest.raises(ValueError, match="claims must be 'model' or 'gold'"):
        EngineConfig(claims="oracle")


class LoopingStage1(Recording):
    """The human-labels teacher, except that stage 1 answers as a small model that looped inside its second
    line and was stopped there by the backend (finish_reason "loop", as TransformersBackend reports it)."""

    def run(self, requests: list[Request]) -> list[Response]:
        answers = super().run(requests)
        return [Response("1. The Eiffel Tower is in Paris.\n2. I like towers. I like towers. I like towers.",
                         meta={"finish_reason": "loop"}) if r.stage == "stage1" else a
                for r, a in zip(requests, answers)]


def test_a_looping_line_is_dropped_and_not_retried(sample):
    conv = copy.deepcopy(sample[0])
    backend = LoopingStage1(LabelsBackend([conv]))
    (turns,) = run_programs([vista_program(conv, EngineConfig())], backend)
    stage1_batches = [b for b in backend.batches if b[0].stage == "stage1"]
    assert len(stage1_batches) == 1                      # no retry with a doubled budget
    for t in turns:
        assert [c.text for c in t.claims] == ["The Eiffel Tower is in Paris."]
        assert t.claims_dropped == {"looping_line": 1} and not t.stage1_truncated
