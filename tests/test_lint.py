"""ruff holds the code to one rule set and one line length (pyproject.toml ``[tool.ruff]``): pyflakes, pycodestyle,
import order, bugbear and pyupgrade, 120 characters. It runs in both tiers of the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    return subprocess.run([exe, "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ruff_check_is_clean():
    run = _ruff(".")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_the_lint_check_sees_what_its_rules_forbid(tmp_path):
    """The check can fail: the repository's own settings find an unused import, a long line, unsorted imports and a
    mutable default argument in a probe."""
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nimport os\n\n\ndef f(x=[]):\n    return x  # " + "x" * 120 + "\n")
    run = _ruff("--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(probe), cwd=tmp_path)
    assert run.returncode == 1
    assert {code for code in ("F401", "E501", "I001", "B006") if code in run.stdout} == {"F401", "E501", "I001", "B006"}
