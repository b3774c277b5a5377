"""Folders a command writes are checked before any work (one line naming the folder and what moves it), and one run
holds its output: a second run on it is refused naming the first's pid, a dead run's lock is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SAMPLE

from vista_distill.pipeline.journal import Journal
from vista_distill.runtime.exit_codes import OUTPUT, OutputError, RunLocked, writable_dir

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
# holds the journal of argv[1] until killed
HOLDER = ("import sys, time; from vista_distill.pipeline.journal import Journal; j = Journal(sys.argv[1], 'x'); "
          "j.open(); print('held', flush=True); time.sleep(600)")


def _blocked(tmp_path: Path) -> Path:
    """A folder no process can create, root included: its parent is a file."""
    (tmp_path / "a-file").write_text("x")
    return tmp_path / "a-file" / "folder"


def test_a_folder_that_cannot_be_made_is_one_line_naming_it_and_what_moves_it(tmp_path):
    with pytest.raises(OutputError, match=r"a-file/folder: cannot write \(the vista-distill cache folder cannot be "
                                          r"created: Not a directory; VISTA_DISTILL_CACHE moves it\)"):
        writable_dir(_blocked(tmp_path), "vista-distill cache folder", "VISTA_DISTILL_CACHE")
    assert writable_dir(tmp_path / "new" / "deep").is_dir()


def test_a_cache_that_cannot_be_written_ends_score_in_one_line(tmp_path):
    env = {**ENV, "VISTA_DISTILL_CACHE": str(_blocked(tmp_path))}
    proc = subprocess.run([sys.executable, "-m", "vista_distill", "score", "--input", str(SAMPLE), "--output",
                           str(tmp_path / "out.jsonl")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == OUTPUT, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "VISTA_DISTILL_CACHE moves it" in errors[0] and "Traceback" not in proc.stderr


def test_a_distill_output_that_cannot_be_written_ends_in_one_line_before_the_teacher_runs(tmp_path):
    out = _blocked(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "vista_distill", "distill", "--config", "recipes/demo-cpu.yaml",
                           "--output-dir", str(out), "teacher.backend=labels"], env=ENV, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == OUTPUT, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: {out}: cannot write (the silver data folder cannot be created: Not a directory; --output-dir or "
        "distill.output_dir moves it)"]


def test_a_second_run_on_a_live_runs_output_is_refused_and_a_dead_runs_is_taken_over(tmp_path):
    journal = tmp_path / "out.journal.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(journal)], env=ENV, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLocked, match=rf"another run \(pid {holder.pid}\) is writing it"):
            Journal(journal, "x").open()
        # the command line: exit 4, one line, and the live run's journal untouched
        before = journal.read_text()
        proc = subprocess.run([sys.executable, "-m", "vista_distill", "score", "--input", str(SAMPLE), "--output",
                               str(tmp_path / "out.jsonl")], env=ENV, capture_output=True, text=True, timeout=600)
        assert proc.returncode == OUTPUT, proc.stderr[-2000:]
        assert [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")] == [
            f"error: {journal}: cannot write (another run (pid {holder.pid}) is writing it; wait for it to end or "
            "choose another output)"] and "Traceback" not in proc.stderr
        assert journal.read_text() == before and "resumed" not in proc.stdout
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # SIGKILLed: the kernel dropped its lock, the next run takes the journal over and resumes what it holds
    log = Journal(journal, "x")
    assert log.open() == {}
    log.append("0", [1])
    log.release()
    again = Journal(journal, "x")
    assert again.open() == {"0": [1]}
    again.remove()
    assert not journal.exists() and not journal.with_name(journal.name + ".lock").exists()


def test_two_journals_in_one_process_take_turns(tmp_path):
    """A run releases its journal when it ends, so the next run in the same process (the Python API) may open it."""
    first = Journal(tmp_path / "j.jsonl", "a")
    first.open()
    with pytest.raises(RunLocked):
        Journal(tmp_path / "j.jsonl", "a").open()
    first.release()
    second = Journal(tmp_path / "j.jsonl", "a")
    assert second.open() == {}
    second.release()
    assert json.loads((tmp_path / "j.jsonl").read_text().splitlines()[0]) == {"journal": "a"}
