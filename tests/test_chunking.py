"""Long references and backgrounds judged in chunks (pipeline/chunking.py, after SCALE): nothing dropped,
each chunk within budget, the supporting chunk decides; the engine on the embedded model finds a fact
that only a late chunk holds."""

from __future__ import annotations

import pytest

from vista_distill.data.schema import Claim, Conversation, Turn
from vista_distill.pipeline.chunking import approx_tokens, chunk_context, combine
from vista_distill.pipeline.engine import EngineConfig, run_programs, vista_program

FILLER = [
    f"Sentence number {i} is about the weather in a small village, where it rained on day {i}." for i in range(40)
]
FACT = "The Ponte Vecchio bridge in Florence was built in 1345."


def test_chunks_keep_every_fact_and_word_once_and_fit_the_budget():
    background = [f"Fact {i} about the history of bridges in Italy." for i in range(12)]
    reference = " ".join([*FILLER, FACT])
    chunks = chunk_context(background, reference, budget=120)
    assert len(chunks) > 3
    assert [f for ch in chunks for f in ch.background] == background
    assert " ".join(ch.reference for ch in chunks if ch.reference).split() == reference.split()
    for ch in chunks:
        assert approx_tokens("\n".join(ch.background)) + approx_tokens(ch.reference) <= 120 + 2
    # the numbering of background facts continues across chunks
    firsts = [ch.first_fact for ch in chunks if ch.background]
    assert firsts[0] == 1 and firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
    assert FACT in chunks[-1].reference and all(FACT not in ch.reference for ch in chunks[:-1])
    # a context within the budget is one chunk, unchanged
    (one,) = chunk_context(background[:2], FACT, budget=10_000)
    assert one.background == background[:2] and one.reference == FACT


def test_a_sentence_longer_than_a_chunk_is_split_between_words():
    long = " ".join(["word"] * 400)
    chunks = chunk_context([], long, budget=50)
    assert len(chunks) > 5 and " ".join(c.reference for c in chunks).split() == long.split()


def test_combine_supporting_chunk_decides_and_any_contradiction_wins():
    def ans(label, p):
        return label, {"label": label, "probs": p}, None

    label, info, _ = combine("stage2", [ans("UNVERIFIABLE", {"VERIFIED": 0.2, "UNVERIFIABLE": 0.8}),
                                        ans("VERIFIED", {"VERIFIED": 0.7, "UNVERIFIABLE": 0.3}),
                                        ans("VERIFIED", {"VERIFIED": 0.9, "UNVERIFIABLE": 0.1})])
    assert (label, info["chunk"], info["chunks"]) == ("VERIFIED", 2, 3) and len(info["per_chunk"]) == 3
    label, info, _ = combine("stage3", [ans("LACKING EVIDENCE", {"LACKING EVIDENCE": 0.9, "CONTRADICTED": 0.1}),
                                        ans("CONTRADICTED", {"LACKING EVIDENCE": 0.4, "CONTRADICTED": 0.6})])
    assert (label, info["chunk"]) == ("CONTRADICTED", 1)
    label, info, _ = combine("stage2", [ans("UNVERIFIABLE", {"VERIFIED": 0.2, "UNVERIFIABLE": 0.8}),
                                        ans("UNVERIFIABLE", {"VERIFIED": 0.4, "UNVERIFIABLE": 0.6})])
    assert (label, info["chunk"]) == ("UNVERIFIABLE", 1)


@pytest.mark.parametrize("budget", [None, 90])
def test_engine_finds_a_fact_only_in_a_late_chunk(embedded_backend, budget):
    reference = " ".join([*FILLER[:12], FACT])
    conv = Conversation(id="long", source="test", turns=[
        Turn(role="user", text="When was the Ponte Vecchio built?"),
        Turn(role="assistant", text="It was built in 1345.", reference=reference,
             gold_claims=[Claim("The Ponte Vecchio bridge in Florence was built in 1345.")]),
    ])
    cfg = EngineConfig(claims="gold", context_budget=budget, max_new_tokens={"stage1": 8, "stage2": 8, "stage3": 8})
    (turns,) = run_programs([vista_program(conv, cfg)], embedded_backend)
    (claim,) = turns[0].claims
    stage2_calls = [c for c in turns[0].calls if c.stage == "stage2"]
    if budget is None:
        assert len(stage2_calls) == 1 and "chunk" not in claim.stage2
        return
    assert claim.stage2["chunks"] == len(stage2_calls) > 2
    # every chunk was sent, nothing cut: the requests' reference texts put together are the reference
    refs = [c.input.split("REFERENCE TEXT:\n")[1].split("\n\nCLAIM:")[0] for c in stage2_calls]
    assert " ".join(refs).split() == reference.split()
    # the chunk that holds the fact is the most supporting one, and it is recorded
    p = [pc["probs"]["VERIFIED"] for pc in claim.stage2["per_chunk"]]
    assert claim.stage2["chunk"] == len(stage2_calls) - 1 == max(range(len(p)), key=p.__getitem__)
