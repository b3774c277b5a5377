"""Conversation files: the authors' JSON and our JSONL, round trips and located errors."""

from __future__ import annotations

import json

import pytest

from vista_distill.cli import main
from vista_distill.data.io import SchemaError, read_conversations, write_conversations
from vista_distill.data.schema import LACKING_EVIDENCE, OUT_OF_SCOPE, VERIFIED


def test_authors_json_round_trips_byte_for_byte_in_content(sample_path, tmp_path):
    convs = read_conversations(sample_path)
    assert [c.id for c in convs] == ["sample-1", "sample-2", "sample-3"]
    first = convs[0]
    assert [t.is_scored for t in first.turns] == [False, True, False, False, False, True]
    assert first.turns[3].reference is None  # "N/A"
    assert [c.label for c in first.turns[1].gold_claims] == [VERIFIED, VERIFIED, OUT_OF_SCOPE]
    assert first.turns[5].gold_claims[2].label == LACKING_EVIDENCE
    out = tmp_path / "rt.json"
    write_conversations(convs, out)
    assert json.loads(out.read_text()) == json.loads(sample_path.read_text())


def test_jsonl_round_trip_keeps_background_and_meta(sample_path, tmp_path):
    convs = read_conversations(sample_path)
    convs[0].background = ["The assistant is a tour guide."]
    out = tmp_path / "rt.jsonl"
    write_conversations(convs, out)
    assert read_conversations(out) == convs


def _write(tmp_path, data, name="bad.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


GOOD_TURN = {"role": "assistant", "utterance": "x", "retrieved_document": "doc"}


@pytest.mark.parametrize(
    "data, where",
    [
        ({"not": "a list"}, "expected a JSON list of conversations"),
        ([[{"role": "bot", "utterance": "x"}]], "conversation 0, turn 0, field 'role'"),
        ([[GOOD_TURN], [{"utterance": "x"}]], "conversation 1, turn 0, field 'role': missing"),
        ([[{"role": "assistant", "utterance": "x"}]], "field 'retrieved_document'"),
        ([[{**GOOD_TURN, "gold_label": "true"}]], "field 'gold_label': expected one of"),
        ([[GOOD_TURN, {**GOOD_TURN, "human_claims": [{"claim_text": "c", "human_judgement": "maybe"}]}]],
         "conversation 0, turn 1, field 'human_claims[0]': unknown human_judgement 'maybe'"),
        ([[{**GOOD_TURN, "utterance": 3}]], "field 'utterance': expected a string"),
        ([[]], "conversation 0: conversation has no turns"),
        ("[[{", "not valid JSON (line 1"),
    ],
)
def test_bad_authors_json_names_file_conversation_and_field(tmp_path, data, where):
    path = _write(tmp_path, data)
    with pytest.raises(SchemaError) as err:
        read_conversations(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_bad_jsonl_names_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "a", "source": "s", "turns": []}\n{"id": "b", "source": "s"}\n')
    with pytest.raises(SchemaError, match=r"bad.jsonl, conversation 1, field 'turns': missing"):
        read_conversations(p)
    p.write_text('{"id": "a", "source": "s", "turns": [{"role": "user", "text": "hi", "gold_label": "yes"}]}\n')
    with pytest.raises(SchemaError, match=r"conversation 0, turn 0, field 'gold_label'"):
        read_conversations(p)


def test_cli_score_reports_bad_input_without_loading_a_model(tmp_path, capsys):
    path = _write(tmp_path, [[{"role": "bot", "utterance": "x"}]])
    assert main(["score", "--input", str(path), "--output", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}, conversation 0, turn 0, field 'role'" in err
    assert main(["score", "--input", str(tmp_path / "missing.json"), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_score_end_to_end_on_the_embedded_model(sample_path, tmp_path):
    """The README's main job, shortened: real model, real files, every scored turn has a verdict or a reason."""
    import subprocess
    import sys

    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "vista_distill", "score", "--input", str(sample_path), "--output", str(out),
         "--limit", "1", "--max-new-tokens", "stage1=48"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["scored"] for r in records] == [True, False, True]
    for r in records:
        if r["scored"]:
            assert r["verdicts"]["safe"] in ("faithful", "hallucinated") or r["unknown_reason"]
            assert r["stage1_raw"] and all(c["stage2"]["raw"] for c in r["claims"])
    summary = json.loads((tmp_path / "out.summary.json").read_text())
    assert summary["scored_turns"] == 2 and summary["by_rule"]["safe"]["gold"]["n_gold"] == 2
    assert 0.0 <= summary["coverage"] <= 1.0 and "accuracy" in summary
    assert "coverage" in proc.stdout and "accuracy" in proc.stdout
