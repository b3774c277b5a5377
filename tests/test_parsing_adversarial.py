"""Adversarial model outputs: a label counts only at the start, claim lists keep only claims.

Each row is an answer a model could give; the expected label is None where the answer must not be
read (a label named later, negated, hedged or next to another label), with a substring of the reason.
"""

from __future__ import annotations

import pytest

from vista_distill.pipeline.parsing import ParsedClaims, parse_claim_list, parse_claims, parse_label

S2 = ("VERIFIED", "UNVERIFIABLE")
S3 = ("OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION")
S4 = ("YES", "NO")

STAGE2 = [
    # measured: the old parser read the first label mentioned anywhere
    ("The claim cannot be verified.", None, "negated label"),
    ("It is not fully verified by the text.", None, "negated label"),
    ("The claim is verified by the reference.", None, "does not start with a label"),
    ("I think it's VERIFIED.", None, "hedged"),
    ("Is it VERIFIED?", None, "hedged"),
    # decoration around a label at the start
    ("**VERIFIED**", "VERIFIED", ""),
    ("`UNVERIFIABLE`", "UNVERIFIABLE", ""),
    ("### Answer: VERIFIED", "VERIFIED", ""),
    ("Final answer: UNVERIFIABLE", "UNVERIFIABLE", ""),
    ("**Final Answer:** VERIFIED", "VERIFIED", ""),
    ("Classification - VERIFIED", "VERIFIED", ""),
    ("LABEL: unverifiable", "UNVERIFIABLE", ""),
    ('"VERIFIED"', "VERIFIED", ""),
    ("[UNVERIFIABLE]", "UNVERIFIABLE", ""),
    ('{"label": "VERIFIED"}', "VERIFIED", ""),
    ("<answer>VERIFIED</answer>", "VERIFIED", ""),
    ("- VERIFIED", "VERIFIED", ""),
    ("> *VERIFIED*", "VERIFIED", ""),
    ("<think>Maybe UNVERIFIABLE? No.</think>\n**Category:** VERIFIED\nThe reference states it.", "VERIFIED", ""),
    # an explanation may name other labels freely
    ("VERIFIED. The reference says nothing UNVERIFIABLE about it.", "VERIFIED", ""),
    ("UNVERIFIABLE, not VERIFIED.", "UNVERIFIABLE", ""),
    ("Unverifiable.\n\nThe claim is not verified.", "UNVERIFIABLE", ""),
    # aliases at the start (decided: they are the answer, and mean UNVERIFIABLE)
    ("Not verified.", "UNVERIFIABLE", ""),
    ("UNVERIFIED", "UNVERIFIABLE", ""),
    ("NOT VERIFIABLE - the reference is silent.", "UNVERIFIABLE", ""),
    # negated, hedged, several labels
    ("Cannot be verified.", None, "negated label"),
    ("Isn't verified", None, "negated label"),
    ("VERIFIED is not correct here.", None, "negated label"),
    ("Possibly VERIFIED", None, "hedged"),
    ("Probably UNVERIFIABLE.", None, "hedged"),
    ("maybe verified", None, "hedged"),
    ("likely VERIFIED", None, "hedged"),
    ("Partially VERIFIED", None, "hedged"),
    ("VERIFIED?", None, "hedged"),
    ("VERIFIED (probably)", None, "hedged"),
    ("VERIFIED, but only partially.", None, "hedged"),
    ("VERIFIED or UNVERIFIABLE", None, "several labels"),
    ("VERIFIED/UNVERIFIABLE", None, "several labels"),
    ("VERIFIED and UNVERIFIABLE", None, "several labels"),
    ("VERIFIED\nUNVERIFIABLE", None, "several labels"),
    ("verifiedly true", None, "no valid label"),
    ("<think>VERIFIED</think>", None, "empty output"),
]

STAGE3 = [
    # measured
    ("This is not CONTRADICTED; it is OUT-OF-SCOPE.", None, "negated label"),
    ("CONTRADICTED - the text says 1990", "CONTRADICTED", "the text says 1990"),
    ("CONTRADICTED - the text says 1990, not LACKING EVIDENCE", "CONTRADICTED",
     "the text says 1990, not LACKING EVIDENCE"),
    ("OUT-OF-SCOPE. It is not CONTRADICTED nor LACKING EVIDENCE.", "OUT-OF-SCOPE",
     "It is not CONTRADICTED nor LACKING EVIDENCE."),
    ("LACKING EVIDENCE, not CONTRADICTED.", "LACKING EVIDENCE", "not CONTRADICTED."),
    ("2. CONTRADICTED\nThe wizard said 1990.", "CONTRADICTED", "The wizard said 1990."),
    ("OUT_OF_SCOPE: opinion", "OUT-OF-SCOPE", "opinion"),
    ("Abstention — the wizard says it does not know.", "ABSTENTION", "the wizard says it does not know."),
    ("CATEGORY: **LACKING EVIDENCE**. The reference never mentions it.", "LACKING EVIDENCE",
     "The reference never mentions it."),
    ("Not CONTRADICTED.", None, "negated label"),
    ("Isn't contradicted", None, "negated label"),
    ("The claim is CONTRADICTED by the reference.", None, "does not start with a label"),
    ("I would say LACKING EVIDENCE.", None, "does not start with a label"),
    ("LACKING EVIDENCE or CONTRADICTED", None, "several labels"),
    ("CONTRADICTED, LACKING EVIDENCE", None, "several labels"),
    ("OUT-OF-SCOPE\nCONTRADICTED", None, "several labels"),
    ("1. OUT-OF-SCOPE - an opinion\n2. CONTRADICTED - the reference disagrees", None, "several labels"),
    ("CONTRADICTED? The text says 1990.", None, "hedged"),
    ("Category: CONTRADICTED (likely)", None, "hedged"),
    ("Probably OUT-OF-SCOPE, as it is an opinion.", None, "hedged"),
]

STAGE4 = [
    ("No. The turn agrees with the history.", "NO", "The turn agrees with the history."),
    ("YES - turn 2 said the opposite.", "YES", "turn 2 said the opposite."),
    ("Not really.", None, "no valid label"),
    ("Yes or no, hard to say.", None, "several labels"),
]


def _check(text: str, labels: tuple[str, ...], label: str | None, detail: str) -> None:
    parsed = parse_label(text, labels)
    if label is None:
        assert parsed.label is None, f"{text!r} was read as {parsed.label}"
        assert parsed.error and detail in parsed.error, parsed.error
    else:
        assert (parsed.label, parsed.error) == (label, None)
        assert detail in parsed.explanation


@pytest.mark.parametrize("text, label, detail", STAGE2)
def test_stage2_adversarial(text, label, detail):
    _check(text, S2, label, detail)


@pytest.mark.parametrize("text, label, detail", STAGE3)
def test_stage3_adversarial(text, label, detail):
    _check(text, S3, label, detail)


@pytest.mark.parametrize("text, label, detail", STAGE4)
def test_stage4_adversarial(text, label, detail):
    _check(text, S4, label, detail)


def test_not_supported_is_a_label_not_a_negation():
    labels = ("SUPPORTED", "NOT SUPPORTED")
    assert parse_label("NOT SUPPORTED. The reference is silent.", labels).label == "NOT SUPPORTED"
    assert parse_label("Not supported", labels).label == "NOT SUPPORTED"
    assert parse_label("It is supported.", labels).label is None


STAGE1 = [
    # (answer, truncated, claims, rejected reasons in order, truncated_line, refusal)
    ("Sorry, I can't help with that.", False, [], ["refusal"], None, True),
    ("I’m sorry, but I can’t help with that.", False, [], ["refusal"], None, True),
    ("I cannot assist with that request.", False, [], ["refusal"], None, True),
    ("As an AI language model, I cannot decompose this turn.", False, [], ["refusal"], None, True),
    ("Here are the claims:\n1. A is B.\n2. C is D.", False, ["A is B.", "C is D."], ["meta prose"], None, False),
    ("The response contains the following atomic claims:\n- A is B.\n- C is D.", False,
     ["A is B.", "C is D."], ["meta prose"], None, False),
    ("Sure! Here you go:\n1. A is B.", False, ["A is B."], ["meta prose"], None, False),
    ("1. A is B.\n2. C is D.\nNote: the turn also greets the user.", False,
     ["A is B.", "C is D."], ["meta prose"], None, False),
    ("There are no claims.", False, [], ["says there are no claims"], None, False),
    ("There are no factual claims in this turn.", False, [], ["says there are no claims"], None, False),
    ("Claims:\nNone", False, [], ["meta prose", "says there are no claims"], None, False),
    ("## Decomposition\n1. A is B.", False, ["A is B."], ["header"], None, False),
    ("**Claims:**\n1. A is B.\n2.\n3. C is D.", False, ["A is B.", "C is D."], ["meta prose", "empty item"],
     None, False),
    ("1. A is B.\nThis line is prose, not an item.\n2. C is D.", False, ["A is B.", "C is D."],
     ["not a list item"], None, False),
    ("<think>list them</think>1. A is B.\n\nI hope this helps!", False, ["A is B."], ["meta prose"], None, False),
    # an unfinished last line (the token budget ran out) is dropped and reported
    ("1. A is B.\n2. C is D.\n3. The wizard was bo", True, ["A is B.", "C is D."], [], "3. The wizard was bo",
     False),
    ("1. A is B.\n2. C is D.\n", True, ["A is B.", "C is D."], [], None, False),   # the last line was finished
    # a list item is a claim even when it reads like a refusal: the turn itself may apologise
    ("1. Sorry, I can't answer that.\n2. The wizard does not know.", False,
     ["Sorry, I can't answer that.", "The wizard does not know."], [], None, False),
    # prose that only looks like meta is a claim
    ("The following year, the team moved to Ohio.\nThe team won in 1990.", False,
     ["The following year, the team moved to Ohio.", "The team won in 1990."], [], None, False),
]


@pytest.mark.parametrize("text, truncated, claims, reasons, truncated_line, refusal", STAGE1)
def test_stage1_adversarial(text, truncated, claims, reasons, truncated_line, refusal):
    parsed = parse_claim_list(text, truncated=truncated)
    assert isinstance(parsed, ParsedClaims)
    assert parsed.claims == claims
    assert [why for _, why in parsed.rejected] == reasons
    assert (parsed.truncated_line, parsed.refusal) == (truncated_line, refusal)
    if not truncated:
        assert parse_claims(text) == claims


def test_rejected_lines_are_reported_as_written():
    parsed = parse_claim_list("Here are the claims:\n1. A is B.\n**Note:** none of this is certain.")
    assert parsed.rejected == [("Here are the claims:", "meta prose"),
                               ("**Note:** none of this is certain.", "meta prose")]
