"""Rebuild the bundled samples (``data/samples/``) from the official files:
``python -m vista_distill.data.benchmarks build [NAME ...] [--data DIR] [--out DIR]``.

``--data`` is a data root as ``vista-distill data fetch`` fills it (default: ``$VISTA_DISTILL_DATA``, else
``../shared/data`` beside the clone); ``--out`` defaults to ``data/samples/``. Without names every benchmark
that bundles a sample is rebuilt, FaithDial first (the BEGIN and FADE samples leave out its references).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..root import data_root
from . import MODULES
from .faithdial.sample import build_samples as build_faithdial
from .samples import SAMPLES


def main(argv: list[str] | None = None) -> int:
    # FaithDial's builder is its own module (faithdial/sample.py); the others' are their module's build_sample
    builders = {"faithdial": build_faithdial,
                **{m.BENCHMARKS[0].name: m.build_sample for m in MODULES if hasattr(m, "build_sample")}}
    ap = argparse.ArgumentParser(prog="python -m vista_distill.data.benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="rebuild bundled samples from the official files")
    b.add_argument("names", nargs="*", choices=[[], *builders], metavar="NAME",
                   help=f"benchmarks to rebuild ({', '.join(builders)}; default all)")
    b.add_argument("--data", default=None, help="the data root holding the official files")
    b.add_argument("--out", default=str(SAMPLES), help="where the samples go (default data/samples/)")
    args = ap.parse_args(argv)
    data = data_root(args.data) or Path(__file__).resolve().parents[3] / "shared" / "data"
    if not data.is_dir():
        print(f"error: no data root at {data}: pass --data DIR (`vista-distill data fetch all --to DIR` fills one)",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    for name in [n for n in builders if n in (args.names or builders)]:
        for line in builders[name](data, out):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
