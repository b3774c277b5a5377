"""Evidence-contrast rows (distill/contrast.py) and the reference edits behind them (pipeline/evidence.py): the
deleted sentence is gone, the inserted one present, the labels right, train split only, the prior kept."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import FAITHDIAL, write_recipe

from vista_distill.config import load_recipe
from vista_distill.distill.run import filter_settings, run_distill
from vista_distill.pipeline.edits import edit_sentence
from vista_distill.pipeline.evidence import LEFT, as_sentence, coverage, insert, sentences, support

REFERENCE = ("The Columbus Zoo and Aquarium opened in 1927 in Powell, Ohio. It is home to more than 10,000 animals. "
             "The zoo covers 580 acres and was directed by Jack Hanna from 1978 to 1992. "
             "Its largest exhibit, Asia Quest, opened in May 2009 with 42 species.")


def test_support_removes_the_supporting_sentence_and_checks_the_rest():
    claim = "Jack Hanna directed the zoo from 1978 to 1992, when it covered 580 acres."
    sup, why = support(claim, REFERENCE)
    assert why == "ok"
    assert sup.removed == ("The zoo covers 580 acres and was directed by Jack Hanna from 1978 to 1992.",)
    assert sup.removed[0] not in sup.remainder and "Jack Hanna" not in sup.remainder
    # every other sentence is still there, word for word
    assert [s for s in sentences(REFERENCE) if s not in sup.removed] == sentences(sup.remainder)
    assert sup.coverage >= 0.5 and sup.coverage_left <= LEFT == 0.25
    assert coverage(claim, sup.remainder) == sup.coverage_left


def test_support_says_why_when_it_cannot_place_the_claim():
    assert support("Penguins cannot fly but swim very well.", REFERENCE) == (
        None, "reference does not state the claim (overlap)")
    assert support("Jack Hanna directed the zoo.", "Jack Hanna directed the zoo for years.")[1] == \
        "single-sentence reference"
    # a claim whose words sit in most of the sentences is not stated in one place
    spread = "The Columbus Zoo opened in Powell, is home to animals, covers acres and has Asia Quest species."
    assert support(spread, REFERENCE) == (None, "claim spread over the reference")


def test_insert_puts_the_claim_in_at_a_sentence_boundary():
    for seed in range(6):
        out = insert(REFERENCE, "the zoo has a penguin house", random.Random(seed))
        assert "The zoo has a penguin house." in sentences(out)
        assert [s for s in sentences(out) if s != "The zoo has a penguin house."] == sentences(REFERENCE)
    assert insert(REFERENCE, "x y", random.Random(3)) == insert(REFERENCE, "x y", random.Random(3))


def test_edit_changes_a_value_the_claim_repeats_or_negates_its_verb():
    sentence = "The zoo covers 580 acres and was directed by Jack Hanna from 1978 to 1992."
    edited, how = edit_sentence(sentence, "The zoo covers 580 acres.", REFERENCE, random.Random(1))
    assert how["old"] == "580" and how["new"] != "580" and edited == sentence.replace("580", how["new"])
    edited, how = edit_sentence("The zoo is home to many animals.", "The zoo is home to lions.", REFERENCE,
                                random.Random(0))
    assert edited == "The zoo is not home to many animals." and how["rule"] == "negation"
    # nothing of the claim to change: no edit
    assert edit_sentence("Its largest exhibit opened in May.", "Penguins swim.", REFERENCE, random.Random(0)) is None


# ------------------------------------------------------------------------------------------ the silver rows




def _run(tmp_path: Path, name: str, overrides: list[str] | None):
    """Distil 80 bundled FaithDial responses (multi-sentence documents and one-sentence snippets) with their labels."""
    recipe = write_recipe(tmp_path / f"{name}.yaml", tmp_path / name,
                          data={"train": [{"benchmark": "file", "source": str(FAITHDIAL), "n": 80}]})
    return run_distill(load_recipe(recipe, overrides), progress=False)


def _user(row: dict) -> str:
    return next(m["content"] for m in row["prompt"] if m["role"] == "user")


def _reference(row: dict) -> str:
    return _user(row).split("REFERENCE TEXT:\n", 1)[1].rsplit("\n\nCLAIM:\n", 1)[0]


def _claim(row: dict) -> str:
    return _user(row).rsplit("\n\nCLAIM:\n", 1)[1]


def test_distill_adds_contrast_rows_to_train_only_with_both_labels(tmp_path):
    import json

    from datasets import load_from_disk

    from vista_distill.train.silver_data import load_silver

    plain = _run(tmp_path, "plain", None)
    assert "evidence_contrast" not in plain.manifest
    res = _run(tmp_path, "contrast", ["distill.evidence_contrast=1.0"])
    assert res.manifest["fingerprints"]["stage1"] == plain.manifest["fingerprints"]["stage1"]
    s2 = load_from_disk(str(res.out_dir / "stage2"))
    made = [r for r in s2["train"] if r["source"].endswith("+contrast")]
    own = [r for r in s2["train"] if not r["source"].endswith("+contrast")]
    assert not [r for r in s2["validation"] if r["source"].endswith("+contrast")], "train split only"
    assert s2["validation"]["prompt"] == load_from_disk(str(plain.out_dir / "stage2"))["validation"]["prompt"]
    records = {(r["conversation_id"], r["claim"], r["teacher"]): r
               for r in map(json.loads, (res.out_dir / "records.jsonl").open()) if "augment" in r}
    kinds = {}
    for row in made:
        # pairing: the teacher's own row of the same claim and turn, the other label, only the reference differs
        twin = [o for o in own if o["conversation_id"] == row["conversation_id"] and _claim(o) == _claim(row)]
        assert twin and all(o["label"] != row["label"] for o in twin)
        assert all(_user(o).split("REFERENCE TEXT:")[0] == _user(row).split("REFERENCE TEXT:")[0] for o in twin)
        rec = records[(row["conversation_id"], _claim(row), row["teacher"])]
        kind = rec["augment"]["kind"]
        kinds[kind] = kinds.get(kind, 0) + 1
        original = _reference(twin[0])
        if kind == "deletion":
            assert row["label"] == "UNVERIFIABLE" and row["teacher"] == "rule:delete-support"
            assert all(s in original and s not in _reference(row) for s in rec["augment"]["removed"])
            assert coverage(_claim(row), _reference(row)) <= LEFT
        elif kind == "edit":
            assert row["label"] == "UNVERIFIABLE" and rec["augment"]["edited"] in _reference(row)
            assert rec["augment"]["removed"][0] not in _reference(row)
        elif kind == "foreign":
            assert row["label"] == "UNVERIFIABLE" and row["teacher"] == "rule:foreign-reference"
            assert _reference(row) != original and (coverage(_claim(row), _reference(row)) or 0) < 0.5
            assert any(_reference(row) == _reference(o) for o in own if o["dialogue_id"] != row["dialogue_id"])
        else:
            assert kind == "insertion" and row["label"] == "VERIFIED" and row["teacher"] == "rule:insert-claim"
            # the claim put in as a sentence; take it out again and the reference is as it was
            inserted = as_sentence(_claim(row))
            assert inserted in _reference(row) and inserted not in original
            assert " ".join(_reference(row).replace(inserted, "", 1).split()) == " ".join(original.split())
    negatives = kinds.get("deletion", 0) + kinds.get("edit", 0) + kinds.get("foreign", 0)
    assert kinds.get("insertion") and kinds.get("deletion") and negatives
    # the prior stays: as many VERIFIED rows added as UNVERIFIABLE ones
    assert kinds["insertion"] == negatives
    s3 = load_from_disk(str(res.out_dir / "stage3"))
    s3_made = [r for r in s3["train"] if r["source"].endswith("+contrast")]
    assert sorted(r["label"] for r in s3_made) == sorted(
        ["LACKING EVIDENCE"] * (kinds.get("deletion", 0) + kinds.get("foreign", 0))
        + ["CONTRADICTED"] * kinds.get("edit", 0))
    m = res.manifest["evidence_contrast"]
    assert m["made"] == dict(sorted(kinds.items())) and m["split"] == "train only"
    report = res.manifest["filters"]["report"]["stage2"]
    assert report["insertion"]["kept"] == kinds["insertion"]
    card = (res.out_dir / "stage2" / "README.md").read_text()
    assert "Evidence-contrast rows" in card and "rule:insert-claim" in card
    load_silver(res.out_dir, "stage2")
    # deterministic: the same settings give the same rows
    again = _run(tmp_path, "again", ["distill.evidence_contrast=1.0"])
    assert again.manifest["fingerprints"] == res.manifest["fingerprints"]


def test_contrast_settings_are_checked(tmp_path):
    recipe = write_recipe(tmp_path / "r.yaml", tmp_path / "out")
    with pytest.raises(ValueError, match=r"distill.evidence_contrast: 2.0 is out of range \(expected in \[0, 1\]\)"):
        load_recipe(recipe, ["distill.evidence_contrast=2"])
    shared = load_recipe(recipe)
    shared.distill.evidence_contrast = 2.0   # set in Python past the reader
    with pytest.raises(ValueError, match="evidence_contrast must be"):
        filter_settings(shared)
    with pytest.raises(ValueError, match="evidence_contrast_kinds"):
        filter_settings(load_recipe(recipe, ["distill.evidence_contrast_kinds=[deletion,swap]"]))
