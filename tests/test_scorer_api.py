"""The typed public API of ``VistaScorer`` (issue 60): typed results that are the written records, one way to
configure the pipeline, arguments that cannot apply refused by name, the authors' format taken as plain data.
Answered by real cheap backends: the human-labels teacher and the overlap rule (no model, no mocks)."""

from __future__ import annotations

import json

import pytest

from vista_distill import ClaimLabel, ScoredClaim, ScoredTurn, ScoreResult, Scores, Verdicts, VistaScorer
from vista_distill.backends.cheap_baselines import BaselineBackend
from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.config import load_recipe
from vista_distill.data.io import SchemaError, read_conversations


@pytest.fixture
def sample(sample_path):
    return read_conversations(sample_path)


def test_typed_turns_are_the_written_records(sample, tmp_path):
    result = VistaScorer(backend=LabelsBackend(sample)).score(sample)
    assert isinstance(result, ScoreResult)
    records_path, _ = result.write(tmp_path / "scores.jsonl")
    written = [json.loads(line) for line in records_path.read_text().splitlines()]
    turns = result.turns
    assert [t.to_dict() for t in turns] == written == result.records
    # key for key, in order: the JSON of a typed turn is the line written
    assert [json.dumps(t.to_dict(), ensure_ascii=False) for t in turns] == records_path.read_text().splitlines()
    assert not (tmp_path / "scores.report.html").exists()   # the page is the report layer's
    for turn, rec in zip(turns, written):
        assert isinstance(turn, ScoredTurn) and isinstance(turn.verdicts, Verdicts) and isinstance(turn.scores, Scores)
        assert (turn.conversation_id, turn.turn_index, turn.scored) == (rec["conversation_id"], rec["turn_index"],
                                                                        rec["scored"])
        assert [(c.text, c.category) for c in turn.claims] == [(c["text"], c["category"]) for c in rec["claims"]]
        assert all(isinstance(c, ScoredClaim) and c.to_dict() == d for c, d in zip(turn.claims, rec["claims"]))
        if turn.scored:
            assert turn.verdicts.to_dict() == rec["verdicts"] and turn.scores.to_dict() == rec["vista_scores"]
            assert turn.verdicts.safe == rec["verdicts"]["safe"] == turn.gold_label   # the human labels answer
        else:
            assert turn.verdicts == Verdicts() and turn.reference is None
    with pytest.raises(AttributeError):   # read-only views
        turns[0].scored = False


def test_the_html_page_is_written_by_the_report_layer(sample, tmp_path):
    from vista_distill.scoring.page import write_score_page

    result = VistaScorer(backend=LabelsBackend(sample)).score(sample)
    out, _ = result.write(tmp_path / "s.jsonl")
    page = write_score_page(result, out)
    assert page == tmp_path / "s.report.html" and page.read_text(encoding="utf-8").count('class="turn') == sum(
        t.scored for t in result.turns)


@pytest.mark.parametrize("name, value", [
    ("model", "HuggingFaceTB/SmolLM2-135M-Instruct"), ("adapters", "runs/x/checkpoints"), ("dtype", "float32"),
    ("threads", 2), ("batch_size", 4), ("load_in_4bit", True), ("chat_template_kwargs", {"enable_thinking": False}),
    ("attn_implementation", "sdpa")])
def test_a_loading_option_with_a_backend_raises_naming_it(name, value):
    with pytest.raises(TypeError, match=rf"VistaScorer: {name} cannot apply with backend="):
        VistaScorer(backend=BaselineBackend("overlap"), **{name: value})


def test_several_clashing_options_are_named_together_and_defaults_pass():
    with pytest.raises(TypeError, match=r"dtype, batch_size cannot apply with backend=.*drop them"):
        VistaScorer(backend=BaselineBackend("overlap"), dtype="float32", batch_size=4)
    # the defaults themselves are no clash
    VistaScorer(backend=BaselineBackend("overlap"), dtype="auto", threads="auto", batch_size=16)


def test_a_given_backend_sets_the_default_prompt_style_by_its_adapters():
    """A backend holding trained stage adapters is read with the compact prompts they were trained on; one without
    them with the paper's few-shot prompts; an explicit style wins. (The real in-process student with adapters is run
    by tests/test_bench.py's profile_scorer test.)"""
    assert VistaScorer(backend=BaselineBackend("overlap")).config.style == "fewshot"
    rule = BaselineBackend("overlap")
    rule.adapters = {"stage2": "runs/x/checkpoints/stage2"}
    assert VistaScorer(backend=rule).config.style == "compact"
    assert VistaScorer(backend=rule, style="fewshot").config.style == "fewshot"


@pytest.mark.parametrize("name, value", [("batch_size", 4), ("threads", 2), ("adapters", "runs/x/checkpoints")])
def test_from_recipe_refuses_what_a_given_backend_cannot_use(name, value):
    with pytest.raises(TypeError, match=rf"from_recipe: {name} cannot apply with backend="):
        VistaScorer.from_recipe(load_recipe(None), backend=BaselineBackend("overlap"), **{name: value})


def test_from_recipe_takes_pipeline_options_over_the_recipe():
    recipe = load_recipe(None, ["pipeline.max_claims=3"])
    s = VistaScorer.from_recipe(recipe, backend=BaselineBackend("overlap"), stage2="generate",
                                max_new_tokens={"stage1": 40})
    assert (s.config.max_claims, s.config.stage2, s.config.max_new_tokens["stage1"]) == (3, "generate", 40)
    assert s.config.max_new_tokens["stage3"] == recipe.engine_config("base").max_new_tokens["stage3"]
    with pytest.raises(TypeError, match="unknown option.*max_claim"):
        VistaScorer.from_recipe(recipe, backend=BaselineBackend("overlap"), max_claim=3)


def test_from_pretrained_takes_the_adapters_first_and_refuses_model_and_backend(tmp_path):
    with pytest.raises(TypeError, match="model= cannot apply here; use base_model="):
        VistaScorer.from_pretrained(tmp_path, model="HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(TypeError, match="backend= cannot apply"):
        VistaScorer.from_pretrained(tmp_path, backend=BaselineBackend("overlap"))
    with pytest.raises(TypeError):
        VistaScorer.from_pretrained()   # the adapters are required


def test_score_takes_the_authors_format_as_plain_data(sample, sample_path):
    raw = json.loads(sample_path.read_text())
    assert isinstance(raw[0][0], dict)
    typed = VistaScorer(backend=LabelsBackend(sample)).score(sample)
    plain = VistaScorer(backend=LabelsBackend(sample)).score(raw)
    assert plain.records == typed.records
    with pytest.raises(TypeError, match="not both"):
        VistaScorer(backend=LabelsBackend(sample)).score([sample[0], raw[1]])


def test_a_bad_turn_dict_is_a_one_line_schema_error(sample):
    bad = [[{"role": "user", "utterance": "Hi"}, {"role": "assistant", "utterance": 3, "retrieved_document": "x"}]]
    with pytest.raises(SchemaError) as err:
        VistaScorer(backend=LabelsBackend(sample)).score(bad)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "utterance" in message and "turn 1" in message


def test_progress_is_a_bool_and_the_callback_is_on_turn(sample):
    with pytest.raises(TypeError, match="progress must be True or False.*on_turn="):
        VistaScorer(backend=LabelsBackend(sample)).score(sample, progress=print)


def test_label_claims_returns_typed_labels():
    docs = ["The Eiffel Tower is 330 metres tall.", "Paris is the capital of France."]
    labels = VistaScorer(backend=BaselineBackend("overlap")).label_claims(
        docs, ["The Eiffel Tower is 330 metres tall.", "Bananas grow on the moon."])
    assert all(isinstance(x, ClaimLabel) for x in labels)
    assert [x.label for x in labels] == ["VERIFIED", "UNVERIFIABLE"]
    assert set(labels[0].to_dict()) == {"label", "p_verified", "probs", "error"}


def test_the_api_pages_example_runs_with_typed_results(monkeypatch, capsys, sample):
    """docs/python-api.md's first example, run as printed (from the repository root, where its sample is)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    match = re.search(
        r"<!-- api-example -->\s*```python\n(.*?)```", (root / "docs" / "python-api.md").read_text(), re.S
    )
    assert match and "turn.verdicts.safe" in match.group(1)
    monkeypatch.chdir(root)
    exec(compile(match.group(1), "python-api.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    heads = [line.split() for line in lines if not line.startswith("   ")]
    assert len(heads) == sum(len(c.scored_turns) for c in sample)
    assert all(verdict == gold for *_, verdict, _score, gold in heads)   # the human labels give the gold verdicts
    assert any(line.startswith("   ") for line in lines)
