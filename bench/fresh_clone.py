"""The README's two fresh-machine commands, timed on a fresh clone, their results filed under ``bench/results/``.

    git clone <repo> /tmp/fresh/vista-distill      # a folder named vista-distill, ../shared beside it or not
    python bench/fresh_clone.py demo --clone /tmp/fresh/vista-distill
    python bench/fresh_clone.py demo --clone /tmp/fresh/vista-distill --float32   # the CPU's bf16 path off
    python bench/fresh_clone.py tests --clone /tmp/fresh/vista-distill

``demo`` runs the line under ``<!-- main-command -->`` in README.md in a new virtual environment inside the clone
(install included in the time) and writes ``demo_cpu/demo_summary_<cpu kind>[_float32].json``: the demo's own
``demo_summary.json`` (steps done and planned, dialogues evaluated, whether a time limit cut it) plus the commit, the
command, its minutes with the install and the load before it started. ``--float32`` adds ``student.dtype=float32``,
what ``auto`` chooses on a CPU without AMX or AVX512-BF16.

``tests`` runs ``bash .ci/run`` (the README's test command, every test, in a new virtual environment) and then the
fast tier (``python -m pytest -q``) there, and replaces its CPU kind's row in ``test_command_time.json``.

The README's and docs' figures are rendered from these files (``python bench/figures.py``).
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
RESULTS = ROOT / "bench" / "results"


def main_command(readme: Path) -> str:
    """The command in the code block under ``<!-- main-command -->``."""
    block = re.search(r"<!-- main-command -->\s*```bash\n(.*?)\n```", readme.read_text(encoding="utf-8"), re.S)
    if block is None:
        raise SystemExit(f"{readme}: no code block under <!-- main-command -->")
    return block.group(1).strip()


def cpu(cpuinfo: str | None = None) -> tuple[str, str]:
    """(kind, name) of this machine's CPU from /proc/cpuinfo: ``("intel-xeon-amx", "Intel Xeon")``; the kind is the
    vendor and family with the best bf16 instructions (``amx``, ``avx512bf16`` or ``avx2``)."""
    info = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text(encoding="utf-8")
    name = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    flags = set(m.group(1).split()) if (m := re.search(r"^flags\s*:\s*(.*)$", info, re.M)) else set()
    label = re.sub(r"\((R|TM)\)", "", name.group(1) if name else "cpu")
    words = re.findall(r"[A-Za-z]+", label)[:2]
    isa = "amx" if "amx_bf16" in flags else "avx512bf16" if "avx512_bf16" in flags else "avx2"
    return "-".join(w.lower() for w in words) + f"-{isa}", " ".join(words)


def pytest_counts(log: str) -> dict[str, float | int | None]:
    """Passed, failed, skipped and error counts and pytest's own minutes, from its last summary line."""
    last = ([line for line in log.splitlines() if re.search(r"\d+ (passed|failed)", line)] or [""])[-1]
    count = {k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}", last)) else 0
             for k in ("passed", "failed", "skipped", "error")}
    took = re.search(r"in ([\d.]+)s", last)
    return {**count, "pytest_minutes": round(float(took.group(1)) / 60, 1) if took else None}


def _commit(clone: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip()


def demo(clone: Path, float32: bool) -> int:
    command = main_command(clone / "README.md") + (" student.dtype=float32" if float32 else "")
    commit, load = _commit(clone), os.getloadavg()[0]
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.perf_counter()
    proc = subprocess.run(["bash", "-c", f". {venv}/bin/activate && {command}"], cwd=clone)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(f"the main command exited {proc.returncode}: {command}")
    summary = json.loads((clone / "runs" / "demo-cpu" / "demo_summary.json").read_text(encoding="utf-8"))
    kind = cpu()[0] + ("_float32" if float32 else "")
    filed = {"commit": commit, "command": command, "cpu_kind": kind, "load_before": round(load, 2),
             "minutes_with_install": round(wall / 60, 1), **summary}
    out = RESULTS / "demo_cpu" / f"demo_summary_{kind}.json"
    out.write_text(json.dumps(filed, indent=2) + "\n", encoding="utf-8")
    print(f"{out}: {filed['minutes_with_install']} min with the install, full run: {summary.get('full_run')}")
    return 0


def tests(clone: Path) -> int:
    commit, load = _commit(clone)[:7], os.getloadavg()[0]
    started = time.perf_counter()
    full = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (clone / "ci.log").write_text(full.stdout + full.stderr, encoding="utf-8")
    fast = subprocess.run(["bash", "-c", ". .venv/bin/activate && python -m pytest -q"], cwd=clone,
                          capture_output=True, text=True)
    (clone / "fast.log").write_text(fast.stdout + fast.stderr, encoding="utf-8")
    kind, name = cpu()
    probe = "from vista_distill.runtime.hardware import resolve_dtype; print(resolve_dtype('auto', 'cpu').dtype)"
    auto = subprocess.run(["bash", "-c", f". .venv/bin/activate && python -c \"{probe}\""], cwd=clone,
                          capture_output=True, text=True).stdout.strip().splitlines()
    row = {"cpu_kind": kind, "cpu": name, "precision": {"bfloat16": "bf16"}.get(auto[-1], auto[-1]) if auto else None,
           "commit": commit, "date": datetime.date.today().isoformat(),
           "load_before": round(load, 2),
           "full": {"exit": full.returncode, "wall_minutes": round(wall / 60, 1), **pytest_counts(full.stdout)},
           "fast": {"exit": fast.returncode, **pytest_counts(fast.stdout)}}
    path = RESULTS / "test_command_time.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    data["runs"] = [r for r in data["runs"] if r["cpu_kind"] != kind] + [row]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(row, indent=2))
    return 0 if full.returncode == 0 and fast.returncode == 0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("demo", help="the README's main command, timed")
    d.add_argument("--clone", required=True, type=Path, help="a fresh clone in a folder named vista-distill")
    d.add_argument("--float32", action="store_true", help="student.dtype=float32: the CPU's bf16 path off")
    t = sub.add_parser("tests", help="bash .ci/run, then the fast tier, timed")
    t.add_argument("--clone", required=True, type=Path, help="a fresh clone in a folder named vista-distill")
    a = ap.parse_args(argv)
    return demo(a.clone.resolve(), a.float32) if a.what == "demo" else tests(a.clone.resolve())


if __name__ == "__main__":
    sys.exit(main())
