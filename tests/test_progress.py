"""runtime/progress.py: the request bar of score, distill and eval (rich, on stderr)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vista_distill.runtime.progress import RequestBar


class Chunked:
    """A backend that reports requests as they finish (``progress``), like the transformers backend."""

    progress = None


def test_without_a_target_requests_count_when_issued(capsys):
    bar = RequestBar("eval base", None)
    bar.on_issue("stage1", 3)
    bar.on_issue("stage2", 2)
    assert (bar.completed, bar.total) == (5, 5)
    bar.close()
    err = capsys.readouterr().err
    assert "eval base" in err and "5/5" in err and "stage2" in err and "eta" in err


def test_backend_progress_counts_finished_requests_and_is_detached_on_close(capsys):
    backend = Chunked()
    bar = RequestBar("score", backend, postfix=lambda: f"{bar.stage} | turns 1/2")
    assert backend.progress == bar.update
    bar.on_issue("stage1", 4)
    assert (bar.completed, bar.total) == (0, 4)   # issued, not yet done
    backend.progress(3)
    assert bar.completed == 3
    bar.close()
    assert backend.progress is None
    err = capsys.readouterr().err
    assert "3/4" in err and "stage1 | turns 1/2" in err and bar.postfix_text == "stage1 | turns 1/2"
    assert len(err.strip().splitlines()) == 1     # not a terminal: written once, when it closes


def test_disabled_bar_prints_nothing_and_leaves_the_backend_alone(capsys):
    backend = Chunked()
    bar = RequestBar("eval student", backend, enabled=False)
    assert backend.progress is None
    bar.on_issue("stage1", 2)
    bar.update(2)
    bar.close()
    assert capsys.readouterr().err == ""


def test_distill_bar_shows_calls_cache_hits_failures_and_rate(capsys):
    from vista_distill.distill.run import Progress

    core = Chunked()
    core.stats = {"calls": 3, "hits": 2, "failures": 1}
    progress = Progress(SimpleNamespace(core=core), enabled=True)
    progress.on_issue("stage1", 6)              # stage 1: every turn's request at once
    core.progress(5)
    progress.on_issue("stage2", 4)              # stage 2 grows the total as claims appear
    assert (progress.bar.completed, progress.bar.total, progress.sent) == (5, 10, 10)
    progress.on_turn(SimpleNamespace(claims=[], stage1_truncated=True, claims_dropped={"duplicate": 2}))
    progress.close()
    assert (progress.parse_failures, progress.truncated_turns, progress.claims_dropped) == (1, 1, {"duplicate": 2})
    err = capsys.readouterr().err
    assert "distill" in err and "calls 3 | cache hits 2 | failures 1 | parse failures 1 |" in err and "req/s" in err
    assert "5/10" in err


@pytest.mark.slow
def test_gguf_conversion_goes_through_the_products_bar(tmp_path):
    """Converting the embedded GGUF (once per cache) shows one bar of ours with the tensor count, not
    transformers' own tqdm bar redrawn line after line into a log."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "VISTA_DISTILL_CACHE": str(tmp_path / "cache")}
    code = (
        "from vista_distill.backends.model_loading import embedded_model_path; "
        "from vista_distill.runtime.progress import quiet_libraries; quiet_libraries(); print(embedded_model_path())"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "cache" / "models").is_dir() and "config.json" in os.listdir(proc.stdout.strip())
    assert "Converting and de-quantizing" not in proc.stderr
    line = next(x for x in proc.stderr.splitlines() if "converting the embedded model from GGUF (once)" in x)
    done, total = line.split("tensors")[0].split()[-1].split("/")
    assert done == total and int(total) > 100


def test_the_score_bar_ends_at_its_total_on_the_real_model(embedded_backend, sample_path, capsys):
    """The whole pipeline on the embedded model with the bar on: every request issued is counted once when it
    finishes, whatever the path (stage 1 in refilled slots, label scoring), so the bar ends at N/N."""
    import re

    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer

    convs = read_conversations(sample_path)[:2]
    VistaScorer(backend=embedded_backend, style="compact",
                max_new_tokens={"stage1": 24, "stage2": 8, "stage3": 16}).score(convs, progress=True)
    counts = [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) req", capsys.readouterr().err)]
    assert len(counts) == 1 and counts[0][0] == counts[0][1] > 0, counts


def test_a_slotted_group_one_batch_long_counts_each_request_once(embedded_backend):
    """Stage 1 decodes a group in slots and counts each request as it ends; a group exactly one batch long was
    counted a second time when its call returned (a bar at 100/84)."""
    from vista_distill.pipeline.protocol import Request

    system = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
    reqs = [Request("stage1", (system, {"role": "user", "content": q}), max_new_tokens=8)
            for q in ("Say hello.", "Name one colour.", "What is 2+2?")]
    bar = RequestBar("score", embedded_backend)
    bar.on_issue("stage1", len(reqs))
    embedded_backend.batch_size = len(reqs)
    try:
        embedded_backend.run(reqs)
    finally:
        embedded_backend.batch_size = 8
        bar.close()
    assert embedded_backend._slots_ok("stage1", tuple(embedded_backend._encode(reqs[0])[0]))
    assert (bar.completed, bar.total) == (3, 3)
