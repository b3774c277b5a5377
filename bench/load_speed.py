"""Time loading a 3.6k-row BEGIN-shaped TSV (the 2022 release's columns, CRLF, unquoted).

The file is generated, with field lengths like the released dev files (knowledge ~150 words,
message ~20, response ~25), so the benchmark needs no ../shared data.

    python bench/load_speed.py [--rows 3600] [--repeats 7]

Writes bench/results/load_speed.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("Fully attributable", "Not fully attributable", "Generic")
WORDS = ("the of and a to in is was for on that by with as at from his her it an were are which this be "
         "or has had first also new after who their one two been its during time years city team film "
         "album song river game music played called known world state national university").split()


def make_tsv(path: Path, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(max(1, int(rng.gauss(n, n / 4)))))

    lines = ["model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label"]
    for _ in range(rows):
        lines.append("\t".join((rng.choice(("t5", "gpt2", "ctrl", "doha")), rng.choice(("wow", "cmu", "tc")),
                                text(150), text(20), text(25) + ' "quoted"', rng.choice(LABELS))))
    path.write_bytes("\r\n".join(lines).encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3600)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "load_speed.md"))
    args = ap.parse_args(argv)

    from vista_distill.data.benchmarks.begin import load_begin

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "begin_test_synthetic.tsv"
        make_tsv(path, args.rows)
        size = path.stat().st_size
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            result = load_begin(path)
            times.append(time.perf_counter() - t0)
        assert result.report.rows_read == args.rows and result.report.reconciles
    med, best = statistics.median(times), min(times)
    lines = [
        "# Loading a BEGIN-shaped TSV",
        "",
        f"`python bench/load_speed.py` — {args.rows} rows, {size / 1e6:.1f} MB, generated with the 2022 "
        "release's columns (CRLF, unquoted, knowledge ~150 words); `load_begin` (csv module, parse, label "
        "mapping, Conversation objects, load report) timed over "
        f"{args.repeats} runs in one process.",
        "",
        "| rows | median s | best s | rows/s (median) |",
        "| ---: | ---: | ---: | ---: |",
        f"| {args.rows} | {med:.3f} | {best:.3f} | {args.rows / med:,.0f} |",
        "",
        f"Machine: {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPU(s) "
        "shared with other work, so treat the figure as an upper bound.",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
