"""data/material.py: a recipe's sources found, loaded, split by dialogue per source and leak-checked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import DIALFACT, FINEDIALFACT, SAMPLE

from vista_distill.config import load_recipe
from vista_distill.data.io import read_conversations
from vista_distill.data.material import MissingDataError, load_material, resolve_source_path
from vista_distill.data.splits import LeakageError

HUMAN = {"benchmark": "vista-human", "source": str(SAMPLE)}


def recipe_with(tmp_path: Path, **data):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"name": "test-material", "teacher": {"backend": "labels"}, "data": data}))
    return load_recipe(str(path))


def test_mixed_material_split_per_source_and_leaking_test_conversations_dropped(tmp_path):
    """Each train source is split by dialogue; a test source that shares dialogues with the train
    material is dropped conversation by conversation when data.leaks is drop-test."""
    from vista_distill.eval.run import load_test_material

    recipe = recipe_with(tmp_path, train=[HUMAN, DIALFACT, FINEDIALFACT], test=[DIALFACT], test_fraction=0.0,
                         leaks="drop-test")
    # every DialFact test conversation is also train material: all dropped, none raised
    material = load_material(recipe)
    assert not [c for c in material.test if c.source == "DialFact"]
    assert next(r for r in material.reports if r["role"] == "test")["dropped_leaks"] == 4

    # test_fraction: every train source contributes to both sides, and eval sees the same held-out set
    recipe = recipe_with(tmp_path, train=[HUMAN, DIALFACT], test=[], test_fraction=0.5, leaks="error")
    material = load_material(recipe)
    for src in ("DialFact",):
        assert [c for c in material.train if c.source == src] and [c for c in material.test if c.source == src]
    assert [c.id for c in load_test_material(recipe)[0]] == [c.id for c in material.test]
    # material loaded once (the demo) is what eval would have loaded itself
    assert load_test_material(recipe, material=material) == (material.test, material.reports)


def test_leaks_are_an_error_or_dropped_from_train(tmp_path):
    with pytest.raises(LeakageError, match="share dialogues with the training material"):
        load_material(recipe_with(tmp_path, train=[HUMAN], test=[HUMAN], leaks="error"))
    material = load_material(recipe_with(tmp_path, train=[HUMAN, DIALFACT], test=[HUMAN], leaks="drop-train"))
    dropped = next(r for r in material.reports if "dropped_leaks" in r)
    assert dropped["role"] == "train" and dropped["dropped_leaks"] == len(material.test) > 0
    assert dropped["dropped_ids"] == sorted(c.id for c in material.test)
    assert {c.source for c in material.train} == {"DialFact"}


def test_missing_source_says_where_it_was_looked_for_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv("VISTA_DISTILL_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    # bundled files from any working directory
    assert Path(resolve_source_path("data/samples/sample_dialogues.json")) == SAMPLE
    with pytest.raises(MissingDataError, match="no data root set: pass --data-root DIR"):
        resolve_source_path("begin/wow/begin_dev_wow.tsv")
    with pytest.raises(MissingDataError) as e:
        load_material(recipe_with(tmp_path, train=[{"benchmark": "begin", "source": "begin/wow/begin_dev_wow.tsv"}],
                                  root=str(tmp_path / "root")))
    assert f"`vista-distill data fetch begin --to {tmp_path / 'root'}` downloads it" in str(e.value)
    # a Hugging Face Hub dataset id is left to the loader that accepts one
    assert resolve_source_path("McGill-NLP/FaithDial", str(tmp_path)) == str(tmp_path / "McGill-NLP/FaithDial")


def test_a_recipe_without_train_sources_is_refused(tmp_path):
    with pytest.raises(ValueError, match="data.train lists no sources"):
        load_material(recipe_with(tmp_path, train=[], test=[HUMAN]))


def test_a_source_with_hold_out_false_trains_whole_and_gives_no_test_material():
    root = Path(__file__).resolve().parents[1]
    r = load_recipe(root / "recipes" / "demo-cpu.yaml")
    assert [s.hold_out for s in r.data.train] == [True, False, False, False, False, False]
    m = load_material(r)
    assert {c.source for c in m.test} == {"FaithDial"}
    assert {"BEGIN", "FADE"} <= {c.source for c in m.train}   # the training-only BEGIN-WoW and FADE rows
    models = {c.id for c in read_conversations(root / "data" / "samples" / "faithdial_models_train.jsonl")}
    assert len(models) == 196 and models <= {c.id for c in m.train} and not models & {c.id for c in m.test}
    factcheck = [c for c in m.train if c.source == "Factcheck-GPT"]
    assert len(factcheck) == 277                      # every decomposed sentence of the bundled file
    # the same source held out: part of it goes to the test side, split by answer
    yml = yaml.safe_load((root / "recipes" / "demo-cpu.yaml").read_text())
    yml["data"]["train"][3]["hold_out"] = True
    path = root / "recipes" / "demo-cpu.yaml"
    r2 = load_recipe(path, [f"data.train={yml['data']['train']}".replace("'", '"')])
    m2 = load_material(r2)
    split = [c for c in m2.test if c.source == "Factcheck-GPT"]
    assert split and len(split) + len([c for c in m2.train if c.source == "Factcheck-GPT"]) == 277
    assert not {c.meta["dialogue_id"] for c in split} & {c.meta["dialogue_id"] for c in m2.train}


def test_split_by_reference_holds_out_no_trained_reference():
    """The demo's test: half the FaithDial dialogues, none of whose knowledge snippets any training response
    (FaithDial's own, the model responses, BEGIN, FADE) was written against; split by dialogue alone, test turns
    shared a snippet with training ones."""
    from vista_distill.data.splits import reference_keys

    root = Path(__file__).resolve().parents[1]
    r = load_recipe(root / "recipes" / "demo-cpu.yaml")
    assert r.data.split_by == "reference"
    m = load_material(r)
    trained = set().union(*(reference_keys(c) for c in m.train))
    assert m.test and not any(reference_keys(c) & trained for c in m.test)
    split = next(x for x in m.reports if x.get("source") == "data/samples/faithdial_balanced_sample.jsonl")["split"]
    moved = split["moved_to_train"]
    assert moved > 0                                  # the model responses share a few snippets: those left the test
    assert split["test"] == len(m.test)
    by_dialogue = load_material(load_recipe(root / "recipes" / "demo-cpu.yaml", ["data.split_by=dialogue"]))
    assert any(reference_keys(c) & set().union(*(reference_keys(t) for t in by_dialogue.train))
               for c in by_dialogue.test)


def test_the_safe_category_material_leaves_the_demo_test_split_as_it_was():
    """data/samples/faithdial_scope_train.jsonl (FaithDial's Generic and abstaining responses) shares no reference
    with the balanced sample: the demo's held-out FaithDial turns are the same with or without it."""
    root = Path(__file__).resolve().parents[1]
    r = load_recipe(root / "recipes" / "demo-cpu.yaml")
    scope = [s for s in r.data.train if s.source.endswith("faithdial_scope_train.jsonl")]
    assert len(scope) == 1 and not scope[0].hold_out
    yml = yaml.safe_load((root / "recipes" / "demo-cpu.yaml").read_text())
    without = [s for s in yml["data"]["train"] if not s["source"].endswith("faithdial_scope_train.jsonl")]
    m, m0 = load_material(r), load_material(load_recipe(root / "recipes" / "demo-cpu.yaml",
                                                        [f"data.train={without}".replace("'", '"')]))
    assert [c.id for c in m.test] == [c.id for c in m0.test] and len(m.test) == 134
    scope_ids = {c.id for c in read_conversations(root / "data" / "samples" / "faithdial_scope_train.jsonl")}
    assert scope_ids <= {c.id for c in m.train} and len(scope_ids) == len(m.train) - len(m0.train)
