"""Parsing of model output: claim lists and labels, in the shapes real models produce."""

from __future__ import annotations

import pytest

from vista_distill.pipeline.parsing import parse_claims, parse_label, strip_think

S2 = ("VERIFIED", "UNVERIFIABLE")
S3 = ("OUT-OF-SCOPE", "CONTRADICTED", "LACKING EVIDENCE", "ABSTENTION")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1. A is B.\n2. C is D.", ["A is B.", "C is D."]),
        ("1) A is B.\n2) C is D.\n", ["A is B.", "C is D."]),
        ("- A is B.\n* C is D.\n• E is F.", ["A is B.", "C is D.", "E is F."]),
        ("DECOMPOSITION:\n1. **A is B.**\n2. `C is D.`", ["A is B.", "C is D."]),
        ("Here are the claims:\n\n1. A is B.\n2. C is D.\n\nLet me know if you need more.", ["A is B.", "C is D."]),
        ("<think>The turn says 1. X</think>\n1. A is B.", ["A is B."]),
        ("A is B.\nC is D.", ["A is B.", "C is D."]),  # no markers: one claim per line
        ("**1.** A is B.\n**2.** C is D.", ["A is B.", "C is D."]),
        ("None", []),
        ("", []),
        ("1. The wizard said \"hi\".", ['The wizard said "hi".']),
    ],
)
def test_parse_claims(text, expected):
    assert parse_claims(text) == expected


@pytest.mark.parametrize(
    "text, labels, label, explanation",
    [
        ("VERIFIED", S2, "VERIFIED", ""),
        ("unverifiable", S2, "UNVERIFIABLE", ""),
        ("CATEGORY: VERIFIED", S2, "VERIFIED", ""),
        ("**Category:** Unverifiable", S2, "UNVERIFIABLE", ""),
        ("NOT verified by the reference.", S2, "UNVERIFIABLE", "by the reference."),
        ("UNVERIFIED", S2, "UNVERIFIABLE", ""),
        ("<think>Is it VERIFIED? no.</think>UNVERIFIABLE", S2, "UNVERIFIABLE", ""),
        ("CONTRADICTED. The wizard has said x.", S3, "CONTRADICTED", "The wizard has said x."),
        ("lacking_evidence - the reference says nothing", S3, "LACKING EVIDENCE", "the reference says nothing"),
        ("Out of scope: an opinion", S3, "OUT-OF-SCOPE", "an opinion"),
        ("Category: **ABSTENTION**\nThe wizard says it does not know.", S3, "ABSTENTION",
         "The wizard says it does not know."),
        ("2. CONTRADICTED", S3, "CONTRADICTED", ""),
        ("LACKING EVIDENCE, not CONTRADICTED.", S3, "LACKING EVIDENCE", "not CONTRADICTED."),
        ("NOT SUPPORTED", ("SUPPORTED", "NOT SUPPORTED"), "NOT SUPPORTED", ""),
        ("Supported.", ("SUPPORTED", "NOT SUPPORTED"), "SUPPORTED", ""),
    ],
)
def test_parse_label(text, labels, label, explanation):
    parsed = parse_label(text, labels)
    assert (parsed.label, parsed.explanation, parsed.error) == (label, explanation, None)


@pytest.mark.parametrize(
    "text, error",
    [
        ("", "empty output"),
        ("I cannot decide.", "no valid label"),
        ("<think>VERIFIED maybe</think>", "empty output"),
        # a label counts only at the start of the answer (VISTA authors' code)
        ("The claim is NOT verified by the reference.", "does not start with a label"),
    ],
)
def test_parse_label_failures_say_why(text, error):
    parsed = parse_label(text, S2)
    assert parsed.label is None and error in parsed.error


def test_label_later_in_the_answer_is_not_read():
    parsed = parse_label("I would say this is LACKING EVIDENCE, not CONTRADICTED.", S3)
    assert parsed.label is None and "does not start with a label" in parsed.error


def test_strip_think_keeps_thoughts_aside():
    assert strip_think("<think>a\nb</think>\nANSWER") == ("ANSWER", "a\nb")
    assert strip_think("reasoning without an opening tag</think>ANSWER") == (
        "ANSWER",
        "reasoning without an opening tag",
    )
    assert strip_think("<think>unfinished") == ("", "unfinished")
    assert strip_think("plain") == ("plain", "")


def test_claims_that_differ_only_in_ordinal_words_are_one_claim():
    """A small model counting through a template says one claim again and again; the turn keeps it once.
    Claims that differ in any other word stay two."""
    from vista_distill.pipeline.engine import dedupe_claims

    counting = [f"The {o} claim is a single claim." for o in ("first", "second", "third", "4th")]
    kept, duplicates, over = dedupe_claims(counting + ["The car is red."], limit=16)
    assert kept == ["The first claim is a single claim.", "The car is red."] and (duplicates, over) == (3, 0)
    distinct = ["The Sun sets due west on the spring equinox.", "The Sun sets due west on the fall equinox.",
                "Mercury is the first planet.", "It took 2 seconds."]
    assert dedupe_claims(distinct, limit=16) == (distinct, 0, 0)
