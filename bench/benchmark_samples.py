"""python bench/benchmark_samples.py [--data ../shared/data]

Do the bundled samples come out of the official files? Every benchmark's ``build_sample`` rebuilds its files
from a data root into a temporary folder; each is compared byte for byte with ``data/samples/``.

Writes ``bench/results/benchmark_samples.json`` (file, sha256 of both, identical) and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

ROOT = harness.ROOT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    args = ap.parse_args()
    from vista_distill.data.benchmarks.__main__ import main as build
    from vista_distill.data.benchmarks.samples import SAMPLES

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if build(["build", "--data", args.data, "--out", str(out)]) != 0:
            return 2
        files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
        rows = [{"file": str(f), "rebuilt_sha256": sha(out / f),
                 "bundled_sha256": sha(SAMPLES / f) if (SAMPLES / f).exists() else None} for f in files]
    for r in rows:
        r["identical"] = r["rebuilt_sha256"] == r["bundled_sha256"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    path = harness.save(ROOT / "bench" / "results", "benchmark_samples", {
        "machine": harness.machine(), "commit": commit.stdout.strip(), "data": args.data,
        "files": len(rows), "identical": sum(r["identical"] for r in rows), "rows": rows})
    print(f"{path}: {sum(r['identical'] for r in rows)} of {len(rows)} files identical")
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
