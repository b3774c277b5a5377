"""Both test tiers timed on a fresh clone, one row per CPU kind in ``bench/results/test_command_time.json``.

    git clone <repo> /tmp/fresh/vista-distill     # a folder named vista-distill, ../shared beside it
    python bench/test_command_time.py --clone /tmp/fresh/vista-distill

The full tier is ``bash .ci/run`` (the README's test command in a new virtual environment, install included); the
fast tier is then ``python -m pytest -q`` in that environment. A run replaces the row of its CPU kind; the README's
and docs' test-command figures are rendered from the file (``python bench/figures.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "test_command_time.json"


def cpu() -> tuple[str, str, str]:
    """(kind, name, precision auto picks) from /proc/cpuinfo: ``intel-xeon-amx``, ``amd-epyc-avx2``..."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    name = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    flags = set((re.search(r"^flags\s*:\s*(.*)$", info, re.M) or ["", ""])[1].split())
    label = (name.group(1) if name else "cpu").replace("(R)", "")
    family = "-".join(re.findall(r"[a-z]+", label.lower())[:2])
    isa = "amx" if "amx_bf16" in flags else "avx512bf16" if "avx512_bf16" in flags else "avx2"
    precision = {"amx": "bf16", "avx2": "float32"}.get(isa, "bf16 or float32, as measured")
    return f"{family}-{isa}", " ".join(label.split()[:2]), precision


def _pytest_counts(log: str) -> dict[str, float | int | None]:
    last = [line for line in log.splitlines() if re.search(r"\d+ passed", line)][-1:] or [""]
    count = {k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}", last[0])) else 0
             for k in ("passed", "failed", "skipped", "error")}
    took = re.search(r"in ([\d.]+)s", last[0])
    return {**count, "pytest_minutes": round(float(took.group(1)) / 60, 1) if took else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clone", required=True, type=Path, help="a fresh clone in a folder named vista-distill")
    clone = ap.parse_args(argv).clone.resolve()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.strip()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    full = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (clone / "ci.log").write_text(full.stdout + full.stderr, encoding="utf-8")
    fast = subprocess.run(["bash", "-c", ". .venv/bin/activate && python -m pytest -q"], cwd=clone,
                          capture_output=True, text=True)
    (clone / "fast.log").write_text(fast.stdout + fast.stderr, encoding="utf-8")
    kind, name, precision = cpu()
    row = {"cpu_kind": kind, "cpu": name, "precision": precision, "commit": commit,
           "date": datetime.date.today().isoformat(), "load_before": round(load, 2),
           "full": {"exit": full.returncode, "wall_minutes": round(wall / 60, 1), **_pytest_counts(full.stdout)},
           "fast": {"exit": fast.returncode, **_pytest_counts(fast.stdout)}}
    data = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {"runs": []}
    data["runs"] = [r for r in data["runs"] if r["cpu_kind"] != kind] + [row]
    OUT.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(row, indent=2))
    return 0 if full.returncode == 0 and fast.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
