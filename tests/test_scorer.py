"""scorer.py: ``VistaScorer`` on the bundled sample, answered by the human-labels teacher (no model)."""

from __future__ import annotations

import json

import pytest

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.pipeline.engine import RULES
from vista_distill.scorer import VistaScorer
from vista_distill.scoring.metrics import SUMMARY_KEYS, turn_metrics
from vista_distill.scoring.results import ScoredTurn


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
    VistaScorer(backend=backend).score(sample, on_turn=turns.append)   # told of each turn, typed
    assert all(isinstance(t, ScoredTurn) for t in turns)
    key = lambda r: (r["conversation_id"], r["turn_index"])   # noqa: E731 - told as they finish, across conversations
    records = VistaScorer(backend=LabelsBackend(sample)).score(sample).records
    assert sorted((t.to_dict() for t in turns), key=key) == sorted(records, key=key)
    assert len(turns) == sum(t.role == "assistant" for c in sample for t in c.turns)
    VistaScorer(backend=backend).score(sample, progress=True)
    err = capsys.readouterr().err
    assert "score" in err and f"turns {len(turns)}/{len(turns)}" in err


def _copies(sample, n):
    """``n`` copies of the sample's conversations under new ids."""
    import dataclasses

    return [dataclasses.replace(c, id=f"{c.id}-copy{k}") for k in range(n) for c in sample]


def test_journal_resumes_after_the_last_finished_chunk(sample, tmp_path, caplog):
    """Each chunk's records reach the journal as it finishes; a rerun reuses the finished chunks (no request
    for them), drops a torn last line, and returns what one uninterrupted run returns; another run's journal is
    not reused."""
    convs = _copies(sample, 3)   # 9 conversations, chunks of 2 -> 5 chunks
    whole = VistaScorer(backend=LabelsBackend(convs)).score(convs)
    journal = tmp_path / "out.journal.jsonl"
    first = VistaScorer(backend=LabelsBackend(convs)).score(convs, journal=journal, chunk_size=2)
    assert first.records == whole.records
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 5 and json.loads(lines[0])["journal"]
    assert [json.loads(x)["key"] for x in lines[1:]] == ["0", "1", "2", "3", "4"]
    # a run killed while writing chunk 2: two whole chunks and half a line
    journal.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    backend = LabelsBackend(convs)
    told = []   # on_turn hears of the computed turns only
    again = VistaScorer(backend=backend).score(convs, journal=journal, chunk_size=2, on_turn=told.append)
    assert again.records == whole.records
    assert len(told) == len(whole.records) - sum(len(json.loads(x)["value"]) for x in lines[1:3])
    assert all(t is not None for t in told)
    assert again.summary["run"]["journal"] == {"path": str(journal), "chunk_size": 2, "chunks": 5, "chunks_resumed": 2}
    # only the three unfinished chunks were asked for
    rest = LabelsBackend(convs)
    VistaScorer(backend=rest).score(convs[4:])
    assert 0 < backend.stats["answered"] == rest.stats["answered"]
    assert "dropped" in caplog.text
    assert [json.loads(x)["key"] for x in journal.read_text().splitlines()[1:]] == ["0", "1", "2", "3", "4"]
    # the same journal, other conversations: another run's, so nothing is reused
    other = convs[:8]
    fresh = VistaScorer(backend=LabelsBackend(other)).score(other, journal=journal, chunk_size=2)
    assert fresh.summary["run"]["journal"]["chunks_resumed"] == 0 and "another run" in caplog.text
    with pytest.raises(ValueError, match="chunk_size"):
        VistaScorer(backend=LabelsBackend(convs)).score(convs, journal=journal, chunk_size=0)


def test_score_killed_mid_run_resumes_to_the_uninterrupted_output(sample, tmp_path, tiny_smollm2):
    """The real CLI, SIGKILLed once its journal holds a finished chunk: run again, it reuses the finished chunks and
    writes the same records as a run that was never interrupted. On the tiny random SmolLM2 (the run's mechanics, not
    what the model says), with enough chunks that the kill lands mid-run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from vista_distill.data.io import write_conversations

    data = tmp_path / "dialogues.jsonl"
    convs = _copies(sample, 16)   # 48 conversations, chunks of 2
    chunks = len(convs) // 2
    write_conversations(convs, data)
    args = ["--input", str(data), "--chunk-size", "2", "--prompts", "compact", "--max-new-tokens", "stage1=24",
            "--threads", "1", "--dtype", "float32", "--no-evidence", "--model", str(tiny_smollm2)]
    cmd = [sys.executable, "-m", "vista_distill", "score", *args]
    killed_out, journal = tmp_path / "killed.jsonl", tmp_path / "killed.journal.jsonl"
    proc = subprocess.Popen([*cmd, "--output", str(killed_out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 2:   # the header and a finished chunk
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close(), proc.stderr.close()
    assert not killed_out.exists()
    finished = len(journal.read_text().splitlines()) - 1
    assert 1 <= finished < chunks
    again = subprocess.run([*cmd, "--output", str(killed_out)], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed: {finished} of {chunks} chunk(s) of 2 conversations" in again.stdout
    assert not journal.exists()
    whole_out = tmp_path / "whole.jsonl"
    whole = subprocess.run([*cmd, "--output", str(whole_out)], capture_output=True, text=True, timeout=900)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "resumed" not in whole.stdout
    assert killed_out.read_text() == whole_out.read_text()
    summary = json.loads((tmp_path / "killed.summary.json").read_text())["run"]
    assert summary["journal"]["chunks_resumed"] == finished


@pytest.mark.slow
def test_a_turn_longer_than_the_context_is_recorded_unscored_and_the_run_goes_on(tmp_path):
    """A 200,000-word assistant turn (its stage-1 prompt far past the model's 8,192 tokens) once allocated a
    40 GB causal mask and lost the run: now that turn's record says why it was not scored, with the token counts,
    the other turns are scored, and the process stays small."""
    import resource
    import subprocess
    import sys

    from vista_distill.data.io import write_conversations
    from vista_distill.data.schema import Conversation, Turn

    ref = "The Eiffel Tower is in Paris. It was completed in 1889."
    long_text = " ".join(["The tower is tall."] * 50_000)   # 200,000 words
    convs = [Conversation("long", "test", [Turn("user", "Tell me about the tower."),
                                           Turn("assistant", long_text, reference=ref)]),
             Conversation("short", "test", [Turn("user", "When was it built?"),
                                            Turn("assistant", "It was completed in 1889.", reference=ref)])]
    data, out = tmp_path / "long.jsonl", tmp_path / "out.jsonl"
    write_conversations(convs, data)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-m", "vista_distill", "score", "--input", str(data), "--output", str(out),
                           "--prompts", "compact", "--max-new-tokens", "stage1=24", "--threads", "1",
                           "--dtype", "float32"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kb < 4 * 2**20 or peak_kb == before   # under 4 GiB (the crash asked for 40 GB at once)
    long_rec, short_rec = [json.loads(x) for x in out.read_text().splitlines()]
    assert long_rec["verdicts"]["safe"] == "unknown" and long_rec["claims"] == []
    reason = long_rec["unknown_reason"]
    assert reason.startswith("stage 1: prompt of ") and "longer than the model's context of 8,192 tokens" in reason
    assert int(reason.split("prompt of ")[1].split(" tokens")[0].replace(",", "")) > 200_000
    assert short_rec["scored"] and "context" not in (short_rec["unknown_reason"] or "")   # the run went on


def test_the_pipeline_is_configured_by_named_options(sample):
    """The pipeline's settings are EngineConfig's fields by name (budgets merged into the defaults); a name it does
    not have, ``config=`` included, is an error that lists the valid ones; the defaults are not changed."""
    from vista_distill.pipeline.engine import EngineConfig

    s = VistaScorer(backend=LabelsBackend(sample), style="compact", max_claims=5, stage2="generate",
                    max_new_tokens={"stage1": 40})
    assert (s.config.style, s.config.max_claims, s.config.stage2) == ("compact", 5, "generate")
    assert s.config.max_new_tokens["stage1"] == 40 and s.config.max_new_tokens["stage3"] == 96
    assert EngineConfig().max_new_tokens["stage1"] == 256
    with pytest.raises(TypeError, match="unknown option.*max_claim.*pipeline options are"):
        VistaScorer(backend=LabelsBackend(sample), max_claim=3)
    with pytest.raises(TypeError, match="unknown option.*config.*keyword options"):
        VistaScorer(backend=LabelsBackend(sample), config=EngineConfig())
    with pytest.raises(ValueError, match="rule must be one of"):
        VistaScorer(backend=LabelsBackend(sample), rule="lenient")


def test_check_is_the_pipelines_stage2_on_a_turns_first_claims(embedded_backend):
    """``VistaScorer.label_claims(docs, claims)`` (MiniCheck's call) sends the request the pipeline sends for the claims
    of a conversation's first turn (no background): the same labels and P(VERIFIED), from the real embedded
    model (to float32 rounding across batch compositions); a docs / claims length mismatch is an error that says so."""
    from vista_distill.data.schema import ASSISTANT, USER, Claim, Conversation, Turn

    docs = ["The Eiffel Tower is in Paris. It was completed in 1889.", "Bananas are berries, botanically."]
    claims = ["The Eiffel Tower was completed in 1889.", "The Eiffel Tower is in Rome."]
    scorer = VistaScorer(backend=embedded_backend)
    checked = [c.to_dict() for c in scorer.label_claims([docs[0], docs[0]], claims) +
               scorer.label_claims([docs[1]], [claims[0]])]
    convs = [
        Conversation(
            f"c{k}",
            "test",
            turns=[
                Turn(USER, "Tell me something."),
                Turn(ASSISTANT, claim, reference=doc, gold_claims=[Claim(claim, "VERIFIED")]),
            ],
        )
        for k, (doc, claim) in enumerate([(docs[0], claims[0]), (docs[0], claims[1]), (docs[1], claims[0])])
    ]
    piped = [
        r["claims"][0]["stage2"] for r in VistaScorer(backend=embedded_backend, claims="gold").score(convs).records
    ]
    assert [c["label"] for c in checked] == [p["label"] for p in piped]
    assert [c["p_verified"] for c in checked] == pytest.approx(
        [p["probs"]["VERIFIED"] for p in piped], abs=1e-4
    )  # batch padding: float32 rounding
    assert all(0.0 < c["p_verified"] < 1.0 and c["error"] is None for c in checked)
    with pytest.raises(ValueError, match="2 references for 1 claims"):
        scorer.label_claims(docs, claims[:1])
