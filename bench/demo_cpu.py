"""The README's main command on a fresh clone, timed, its closing summary filed under ``bench/results/demo_cpu/``.

    git clone <repo> /tmp/fresh/vista-distill           # a clean clone, ../shared beside it or not
    python bench/demo_cpu.py --clone /tmp/fresh/vista-distill
    python bench/demo_cpu.py --clone /tmp/fresh/vista-distill --float32   # the CPU's bf16 path off, as `auto`
                                                                          # does on an AVX2-only CPU

Runs the line under ``<!-- main-command -->`` in README.md in a new virtual environment inside the clone (the
install included in the wall time), then writes ``demo_summary_<cpu kind>[_float32].json``: the demo's own
``demo_summary.json`` plus the commit, the command, its wall minutes and the load before it started. The docs'
demo figures are rendered from these files (``python bench/figures.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "demo_cpu"


def main_command(readme: Path) -> str:
    """The command in the code block under ``<!-- main-command -->``."""
    block = re.search(r"<!-- main-command -->\s*```bash\n(.*?)\n```", readme.read_text(encoding="utf-8"), re.S)
    if block is None:
        raise SystemExit(f"{readme}: no code block under <!-- main-command -->")
    return block.group(1).strip()


def cpu_kind(hardware: dict) -> str:
    """``intel-xeon-amx``, ``amd-epyc-avx512bf16``, ``amd-epyc-avx2``...: vendor, model family and the best bf16 ISA."""
    name = str(hardware.get("cpu") or hardware.get("device_name") or "cpu").lower().replace("(r)", "")
    family = "-".join(re.findall(r"[a-z]+", name)[:2]) or "cpu"
    flags = set(hardware.get("cpu_flags") or [])
    isa = "amx" if (hardware.get("capability") or {}).get("cpu_amx_tile") else \
        "avx512bf16" if "avx512_bf16" in flags else "avx2"
    return f"{family}-{isa}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clone", required=True, type=Path, help="a fresh clone of this repository (a folder "
                                                              "named vista-distill)")
    p.add_argument("--float32", action="store_true", help="student.dtype=float32: the bf16 path disabled")
    a = p.parse_args(argv)
    clone = a.clone.resolve()
    command = main_command(clone / "README.md") + (" student.dtype=float32" if a.float32 else "")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.strip()
    load = os.getloadavg()[0]
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.perf_counter()
    shell = f". {venv}/bin/activate && {command}"
    proc = subprocess.run(["bash", "-c", shell], cwd=clone)
    wall = time.perf_counter() - started
    if proc.returncode:
        raise SystemExit(f"the main command exited {proc.returncode}: {command}")
    summary = json.loads((clone / "runs" / "demo-cpu" / "demo_summary.json").read_text(encoding="utf-8"))
    kind = cpu_kind(summary["hardware"]) + ("_float32" if a.float32 else "")
    filed = {"commit": commit, "command": command, "cpu_kind": kind, "load_before": round(load, 2),
             "minutes_with_install": round(wall / 60, 1), **summary}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"demo_summary_{kind}.json"
    out.write_text(json.dumps(filed, indent=2) + "\n", encoding="utf-8")
    print(f"{out}: {filed['minutes_with_install']} min with the install, full run: {summary.get('full_run')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
