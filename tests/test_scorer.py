"""scorer.py: ``VistaScorer`` on the bundled sample, answered by the human-labels teacher (no model)."""

from __future__ import annotations

import json

import pytest
from vista_distill.backends.labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.eval.metrics import SUMMARY_KEYS, turn_metrics
from vista_distill.pipeline.engine import RULES
from vista_distill.scorer import VistaScorer


@pytest.fixture
def sample(sample_path):
    return read_conversations(sample_path)


def test_records_summary_and_files(sample, tmp_path):
    result = VistaScorer(backend=LabelsBackend(sample)).score(sample)
    assistant_turns = sum(t.role == "assistant" for c in sample for t in c.turns)
    assert len(result.records) == assistant_turns
    s = result.summary
    assert (s["conversations"], s["assistant_turns"]) == (len(sample), assistant_turns)
    assert s["scored_turns"] + s["context_turns"] == assistant_turns
    assert s["claims"] == sum(len(r["claims"]) for r in result.records if r["scored"])
    # the human labels answer every stage: every gold turn gets its gold verdict under the safe rule
    assert s["coverage"] == 1.0 and s["accuracy"] == 1.0 and s["unknown"] == []
    for rule in RULES:
        # the summary's gold scores are those eval reports for the same turns
        gold = s["by_rule"][rule]["gold"]
        assert list(gold) == list(SUMMARY_KEYS)
        assert gold == {k: turn_metrics(result.records, rule)[k] for k in SUMMARY_KEYS}
    assert s["run"]["backend"] == "labels" and s["run"]["style"] == "fewshot"

    records_path, summary_path = result.write(tmp_path / "scores.jsonl")
    assert [json.loads(line) for line in records_path.read_text().splitlines()] == result.records
    assert summary_path.name == "scores.summary.json"
    assert json.loads(summary_path.read_text())["by_rule"] == s["by_rule"]


def test_progress_bar_counts_requests_and_turns(sample, capsys):
    backend = LabelsBackend(sample)
    turns = []
    VistaScorer(backend=backend).score(sample, progress=turns.append)   # a callable: told of each turn
    assert len(turns) == sum(t.role == "assistant" for c in sample for t in c.turns)
    VistaScorer(backend=backend).score(sample, progress=True)
    err = capsys.readouterr().err
    assert "score" in err and f"turns {len(turns)}/{len(turns)}" in err
