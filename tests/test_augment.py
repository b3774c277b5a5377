"""distill/augment.py: VERIFIED / CONTRADICTED pairs made by rule from the references, and their way
into the silver data (train split only, off by default, nothing changed when off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_recipe

from vista_distill.config import load_recipe
from vista_distill.distill import augment
from vista_distill.distill.augment import falsify, rejection, sentences, spans
from vista_distill.distill.run import filter_settings, run_distill
from vista_distill.distill.silver import COLUMNS

# numbers, a year, a month and two entities (plus a sentence that cannot be a claim)
REFERENCE = ("The Columbus Zoo and Aquarium opened in 1927 in Powell, Ohio. It is home to more than 10,000 animals. "
             "The zoo covers 580 acres and was directed by Jack Hanna from 1978 to 1992. "
             "Its largest exhibit, Asia Quest, opened in May 2009 with 42 species. Do you like zoos?")


def assert_one_span(pair: augment.Pair) -> None:
    """The falsified claim is the original with exactly ``old`` replaced by ``new`` at ``start``."""
    o, f = pair.original, pair.falsified
    assert o[pair.start:pair.start + len(pair.old)] == pair.old
    assert f == o[:pair.start] + pair.new + o[pair.start + len(pair.old):]
    assert pair.old != pair.new and pair.new not in o
    prefix = next(i for i, (a, b) in enumerate(zip(o + "\0", f + "\1")) if a != b)
    assert prefix >= pair.start and o[pair.start + len(pair.old):] == f[pair.start + len(pair.new):]


def test_sentences_and_the_factual_filter():
    assert sentences("Dr. Smith founded it in 1900. J. R. R. Tolkien wrote it.\nA title line") == [
        "Dr. Smith founded it in 1900.", "J. R. R. Tolkien wrote it.", "A title line"]
    assert rejection("The Columbus Zoo and Aquarium opened in 1927 in Powell, Ohio.") is None
    assert rejection("Is the Columbus Zoo open in 1927 for visitors?") == "not a statement"
    assert rejection("I think the Columbus Zoo is the best zoo in Ohio.") == "first or second person"
    assert rejection("It is home to more than 10,000 animals.") == "not standalone"
    assert rejection("Zoos opened in 1927.") == "length"
    assert rejection("Cats are friendly and curious animals.") == "nothing factual to check"
    kinds = {s.text: (s.rule, s.kind) for s in spans("Jack Hanna directed the zoo from 1978 to 1992 with 42 staff "
                                                      "in May, in the 1980s, for the 3rd time.")}
    assert kinds == {"Jack Hanna": ("entity", "entity"), "1978": ("date", "year"), "1992": ("date", "year"),
                     "42": ("number", "integer"), "May": ("date", "month"), "1980s": ("date", "decade"),
                     "3rd": ("number", "ordinal")}


def test_pairs_swap_one_span_with_a_value_of_the_same_document():
    rules, origins = set(), set()
    for seed in range(40):
        pairs = falsify(REFERENCE, 3, seed)
        assert 1 <= len(pairs) <= 3 and len({p.original for p in pairs}) == len(pairs)
        for p in pairs:
            assert p.original in sentences(REFERENCE) and rejection(p.original) is None
            assert_one_span(p)
            if p.origin == "document":
                assert p.new in REFERENCE   # another value of the same reference
                assert any(s.text == p.new and s.kind == p.kind for x in sentences(REFERENCE) for s in spans(x))
            rules.add(p.rule)
            origins.add(p.origin)
            expl = augment.explanation(p)
            assert p.new in expl and p.old in expl and "\n" not in expl
    assert rules == {"number", "date", "entity"} and "document" in origins


def test_nearby_values_when_the_document_has_no_other():
    ref = "The archaeological record shows dog remains buried beside humans 14,700 years ago."
    for seed in range(10):
        (p,) = falsify(ref, 5, seed)
        assert p.rule == "number" and p.origin == "nearby" and p.old == "14,700"
        assert_one_span(p)
        assert "," in p.new and p.new.replace(",", "").isdigit()   # the same format
    (p,) = falsify("The Chrysler Building in New York was finished in 1930.", 1, 0)
    assert (p.rule, p.kind, p.origin) == ("date", "year", "nearby") and 1920 <= int(p.new) <= 1940


@pytest.mark.parametrize("reference", [
    "Cats are friendly animals. Most people like them a lot.",        # nothing factual
    "I visited the Louvre in Paris in 2019 with my family.",         # first person
    "Is the Eiffel Tower in Paris taller than 300 metres?",          # a question
    "Apples grow on the trees of orchards in Kent.",                 # one entity: nothing to swap it with
    "It was completed in 1889 as the entrance arch to the fair.",    # not standalone
])
def test_nothing_falsifiable_gives_no_pair(reference):
    assert falsify(reference, 3, 0) == []


def test_deterministic_by_seed():
    assert falsify(REFERENCE, 3, 7) == falsify(REFERENCE, 3, 7)
    assert falsify(REFERENCE, 0, 7) == []
    assert len({tuple(falsify(REFERENCE, 3, s)) for s in range(10)}) > 1


# ------------------------------------------------------------------------------------------- end to end


def _run(tmp_path: Path, name: str, overrides: list[str] | None):
    recipe = write_recipe(tmp_path / f"{name}.yaml", tmp_path / name)
    return run_distill(load_recipe(recipe, overrides), progress=False)


def test_distill_adds_contradicted_rows_to_train_only(tmp_path):
    from datasets import load_from_disk

    from vista_distill.train.silver_data import load_silver

    plain = _run(tmp_path, "plain", None)
    zero = _run(tmp_path, "zero", ["distill.augment_falsified=0"])
    assert zero.manifest["fingerprint"] == plain.manifest["fingerprint"]
    assert "augment" not in zero.manifest
    assert "falsified" not in zero.manifest["filters"]["report"]["stage3"]

    res = _run(tmp_path, "aug", ["distill.augment_falsified=1"])
    m = res.manifest
    assert m["augment"]["pairs"] > 0 and m["augment"]["kept"]["stage3"] > 0
    assert m["fingerprints"]["stage1"] == plain.manifest["fingerprints"]["stage1"]
    s3 = load_from_disk(str(res.out_dir / "stage3"))
    made = [r for r in s3["train"] if r["source"].endswith("+falsified")]
    assert made and all(r["label"] == "CONTRADICTED" and r["teacher"] == "rule:falsify" for r in made)
    assert all(r["completion"][0]["content"].startswith("CONTRADICTED. The claim says ") for r in made)
    s2 = load_from_disk(str(res.out_dir / "stage2"))
    made2 = [r for r in s2["train"] if r["source"].endswith("+falsified")]
    assert {r["label"] for r in made2} == {"VERIFIED", "UNVERIFIABLE"}
    for stage in ("stage2", "stage3"):
        dd = load_from_disk(str(res.out_dir / stage))
        assert tuple(dd["train"].column_names) == COLUMNS
        assert not [r for r in dd["validation"] if r["source"].endswith("+falsified")]
        assert dd["validation"]["prompt"] == load_from_disk(str(plain.out_dir / stage))["validation"]["prompt"]
        # no reference of a test dialogue reaches train through the augmented rows
        assert not {r["dialogue_id"] for r in dd["train"]} & set(dd["validation"]["dialogue_id"])
        load_silver(res.out_dir, stage)   # train/'s own validation of every row
    counts = m["counts"]["stage3"]["train"]["labels"]
    assert counts["CONTRADICTED"] == plain.manifest["counts"]["stage3"]["train"]["labels"].get("CONTRADICTED", 0) \
        + len(made)
    rep = m["filters"]["report"]["stage3"]
    assert rep["falsified"]["kept"] == len(made) and rep["candidates"] > plain.manifest["filters"]["report"][
        "stage3"]["candidates"]
    assert "made by rule from the references" in (res.out_dir / "stage3" / "README.md").read_text()
    records = [json.loads(line) for line in (res.out_dir / "records.jsonl").read_text().splitlines()]
    aug = [r for r in records if "augment" in r]
    assert aug and all(r["teacher"] == "rule:falsify" and r["split"] == "train" for r in aug)


def test_negative_count_is_a_recipe_error(tmp_path):
    with pytest.raises(ValueError, match=r"distill.augment_falsified: -1 is out of range"):   # as it is read
        load_recipe(write_recipe(tmp_path / "r.yaml", tmp_path / "out"), ["distill.augment_falsified=-1"])
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", tmp_path / "out"))
    recipe.distill.augment_falsified = -1   # set in Python past the reader
    with pytest.raises(ValueError, match="augment_falsified"):
        filter_settings(recipe)


# ------------------------------------------------------------------------------------------- swapped references


def _user(row: dict) -> str:
    return next(m["content"] for m in row["prompt"] if m["role"] == "user")


def _reference(row: dict) -> str:
    return _user(row).split("REFERENCE TEXT:\n", 1)[1].rsplit("\n\nCLAIM:\n", 1)[0]


def test_distill_adds_swapped_reference_rows_to_train_only(tmp_path):
    from datasets import load_from_disk

    from vista_distill.train.silver_data import load_silver

    plain = _run(tmp_path, "plain", None)
    zero = _run(tmp_path, "zero", ["distill.augment_swapped=0"])
    assert zero.manifest["fingerprint"] == plain.manifest["fingerprint"] and "augment_swapped" not in zero.manifest

    res = _run(tmp_path, "swap", ["distill.augment_swapped=1.0"])
    for stage in ("stage1", "stage3"):   # stage 2 only
        assert res.manifest["fingerprints"][stage] == plain.manifest["fingerprints"][stage]
    dd = load_from_disk(str(res.out_dir / "stage2"))
    made = [r for r in dd["train"] if r["source"].endswith("+swapped")]
    own = [r for r in dd["train"] if not r["source"].endswith("+swapped")]
    assert made and all(r["label"] == "UNVERIFIABLE" and r["teacher"] == "rule:swap-reference" for r in made)
    assert not [r for r in dd["validation"] if r["source"].endswith("+swapped")]
    assert dd["validation"]["prompt"] == load_from_disk(str(plain.out_dir / "stage2"))["validation"]["prompt"]
    refs_by_dialogue = {}
    for r in own:
        refs_by_dialogue.setdefault(r["dialogue_id"], set()).add(_reference(r))
    for r in made:
        claim = _user(r).rsplit("\n\nCLAIM:\n", 1)[1]
        original = [o for o in own if o["conversation_id"] == r["conversation_id"] and o["label"] == "VERIFIED"
                    and _user(o).endswith("CLAIM:\n" + claim)]
        assert original, "a swapped row copies a VERIFIED claim of its own turn"
        ref = _reference(r)
        assert ref not in {_reference(o) for o in original}
        # the reference is another *training* dialogue's, so no test reference reaches train
        assert any(ref in refs for d, refs in refs_by_dialogue.items() if d != r["dialogue_id"])
        words = augment.content_words(claim)
        assert not words or len(words & augment.content_words(ref)) / len(words) < 0.5
    assert res.manifest["augment_swapped"]["kept"] == len(made)
    assert res.manifest["filters"]["report"]["stage2"]["swapped"]["kept"] == len(made)
    assert "another training dialogue's reference" in (res.out_dir / "stage2" / "README.md").read_text()
    load_silver(res.out_dir, "stage2")

    # the claims and references drawn depend on the texts and the seed alone: half the share, a subset of the rows
    half = _run(tmp_path, "half", ["distill.augment_swapped=0.5"])
    half_rows = [r["prompt"] for r in load_from_disk(str(half.out_dir / "stage2"))["train"]
                 if r["source"].endswith("+swapped")]
    assert 0 < len(half_rows) < len(made) and all(p in [r["prompt"] for r in made] for p in half_rows)


def test_swap_share_outside_0_1_is_a_recipe_error(tmp_path):
    with pytest.raises(ValueError, match=r"distill.augment_swapped: 1.5 is out of range"):
        load_recipe(write_recipe(tmp_path / "r.yaml", tmp_path / "out"), ["distill.augment_swapped=1.5"])
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", tmp_path / "out"))
    recipe.distill.augment_swapped = 1.5
    with pytest.raises(ValueError, match="augment_swapped"):
        filter_settings(recipe)
