"""The README's first screen: its Python example runs as printed, with the embedded model, on a folder holding
nothing but the sample file it reads (no runs/, no demo, no download); its commands are the ones CI runs."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _block(marker: str, lang: str) -> str:
    match = re.search(rf"<!-- {marker} -->\s*```{lang}\n(.*?)```", README, re.S)
    assert match, f"README.md has no ```{lang} block under <!-- {marker} -->"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_python_example_runs_as_printed(tmp_path):
    code = _block("python-example", "python")
    sample = "data/samples/sample_dialogues.json"
    assert sample in code and "runs/" not in code.split("# MiniCheck")[0]
    (tmp_path / "data" / "samples").mkdir(parents=True)
    shutil.copy(ROOT / sample, tmp_path / sample)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=1200, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]   # it wrote nothing, needed no runs/
    lines = run.stdout.strip().splitlines()
    *turns, first, second = lines
    # the two dialogues' turns with a reference: one line each, a verdict then (claim text, category) pairs
    from vista_distill import read_conversations
    from vista_distill.data.vocabulary import STAGE3_LABELS

    assert len(turns) == sum(len(c.scored_turns) for c in read_conversations(ROOT / sample)[:2])
    for line in turns:
        verdict, claims = line.split(" ", 1)
        assert verdict in ("faithful", "hallucinated", "unknown")
        pairs = ast.literal_eval(claims)
        assert isinstance(pairs, list) and all(isinstance(text, str) and text and
                                               category in ("VERIFIED", *STAGE3_LABELS, None)
                                               for text, category in pairs)
    # one typed label per (document, claim) pair: the label, then P(VERIFIED)
    for line in (first, second):
        label, p = line.split(" ")
        assert label in ("VERIFIED", "UNVERIFIABLE") and 0.0 <= float(p) <= 1.0


def test_the_commands_are_short_and_ci_runs_the_test_command():
    main, tests = _block("main-command", "bash").strip(), _block("test-command", "bash").strip()
    assert main.endswith("vista-distill demo") and len(main) < 130
    assert tests.startswith("bash .ci/setup-tests.sh") and len(tests) < 80
    # the full tier: `-m ""` undoes the fast tier's default selection (pyproject.toml addopts), so every test runs
    assert tests.endswith('python -m pytest -q -m ""')
    assert "-m 'not slow and not server and not browser'" in (ROOT / "pyproject.toml").read_text()
    assert "CMAKE_ARGS" in (ROOT / ".ci" / "setup-tests.sh").read_text()
    assert "<!-- test-command -->" in (ROOT / ".ci" / "run").read_text()
