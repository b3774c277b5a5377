"""``vista-distill data prepare`` / ``vista-distill data stats`` / ``vista-distill data fetch``.

The top-level CLI calls :func:`add_data_subcommands` on its subparsers and dispatches with
``args.func(args)``, which returns the exit code (0 ok, 1 error, reported on stderr).
Heavy modules are imported inside the commands so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..runtime.exit_codes import BAD_INPUT

AMBIGUOUS_HELP = ("labels with no agreed binary mapping (Generic, Uncooperative, off-topic, uninterpretable, "
                  "NOT ENOUGH INFO on personal responses): 'hallucinated' (default; the paper counts anything "
                  "not attributable as UNVERIFIABLE), 'faithful', or 'drop' (counted as rejected)")


def add_data_subcommands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``data prepare``, ``data stats`` and ``data fetch`` to a top-level ``add_subparsers()`` object."""
    from .benchmarks import BENCHMARKS  # light: the loaders import the standard library only

    data = subparsers.add_parser("data", help="prepare benchmark data and inspect conversation files",
                                 description="Benchmark loaders, the paper's sampling, statistics.")
    sub = data.add_subparsers(dest="data_command", metavar="{prepare,stats,fetch}")
    sub.required = True

    p = sub.add_parser("prepare", help="load a benchmark in its official format, sample, write conversations",
                       description="Load a benchmark, sample N conversations with a seed (the paper: 500 from "
                                   "the test split) and write them as JSONL (or the authors' JSON for .json).")
    p.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    p.add_argument("--source", required=True,
                   help="file or directory in the benchmark's official format (for faithdial also a Hub id)")
    p.add_argument("--split", help="split to pick inside a directory / Hub dataset (e.g. test, dev)")
    p.add_argument("--n", type=int, default=500, help="conversations to sample (default 500; 0 = all)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--ambiguous", choices=("hallucinated", "faithful", "drop"), help=AMBIGUOUS_HELP)
    p.add_argument("--on-error", choices=("raise", "reject"), default="raise",
                   help="malformed rows: stop with an error naming file and row (default), or reject them "
                        "and count them with the reason")
    p.add_argument("--label-map", action="append", default=[], metavar="LABEL=CLASS",
                   help="re-map an original label to faithful/hallucinated/ambiguous, e.g. "
                        "'Partial Hallucination=ambiguous' (repeatable)")
    g = p.add_argument_group("benchmark-specific options")
    g.add_argument("--wow", help="ais: Wizard of Wikipedia test_random_split.json")
    g.add_argument("--qrecc", help="ais: QReCC qrecc_test.json")
    g.add_argument("--qrecc-passages", help="ais: QReCC passage collection (JSONL file or directory)")
    g.add_argument("--responses", choices=("original", "edited"), help="faithdial: which responses to score")
    g.add_argument("--text", choices=("auto", "corrupted", "response"),
                   help="fade: which response text to score")
    g.add_argument("--speakers", choices=("all", "assistant"), help="fade: score responses of both speakers?")
    g.add_argument("--turn-label", choices=("none", "from_claims"),
                   help="finedialfact: turn labels from claims?")
    g.add_argument("--evidence", choices=("all", "selected"), help="finedialfact: passages in the reference")
    g.add_argument("--claims", choices=("none", "response"), help="dialfact: the response as the turn's one claim")
    p.add_argument("--against", action="append", default=[], metavar="FILE",
                   help="held-out conversations (e.g. test material) that the output must not share a "
                        "dialogue with; a leak is an error unless --drop-leaks (repeatable)")
    p.add_argument("--drop-leaks", action="store_true", help="drop leaking conversations instead of failing")
    p.add_argument("--report", help="also write the load report (counts, rejected rows with reasons) as JSON")
    p.add_argument("--out", required=True, help="output .jsonl (ours) or .json (the authors' format)")
    p.set_defaults(func=cmd_prepare)

    s = sub.add_parser("stats", help="conversations, scored turns, labels, claims, reference lengths",
                       description="Statistics of a conversation file (.jsonl or the authors' .json).")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=cmd_stats)

    f = sub.add_parser("fetch", help="download benchmarks from their official locations into a data root",
                       description="Download benchmarks from their official locations (repository files pinned "
                                   "to a commit, Hugging Face Hub files, archive members) into the layout recipes "
                                   "name, checking sha256 and recording what was fetched in "
                                   "DIR/<benchmark>/FETCHED.json. Files already in place are not downloaded again. "
                                   "Without a network it says, one line per file, what to download and where to "
                                   "put it. Where each benchmark comes from: --list, or data/SOURCES.md.")
    f.add_argument("benchmarks", nargs="*", metavar="BENCHMARK", help="benchmark folder name(s), or 'all'")
    f.add_argument("--to", metavar="DIR",
                   help="the data root to fill (default: --data-root, then $VISTA_DISTILL_DATA)")
    f.add_argument("--data-root", metavar="DIR", help=argparse.SUPPRESS)
    f.add_argument("--list", action="store_true",
                   help="print every benchmark with its official location, licence and layout, and exit")
    f.add_argument("--mirror", metavar="URL_OR_DIR",
                   help="a base URL or local folder that replaces the official hosts, with the same paths "
                        "(e.g. MIRROR/google/BEGIN-dataset/<commit>/wow/begin_dev_wow.tsv)")
    f.add_argument("--no-verify", action="store_true",
                   help="accept files whose sha256 differs from the one recorded for the official release")
    f.add_argument("--force", action="store_true", help="download again even when the files are in place")
    f.add_argument(
        "--registry",
        metavar="FILE",
        help="benchmark definitions (JSON, the fields of data/download/catalogue.py's Source) to use instead of "
        "the built-in ones, e.g. a private benchmark or a newer pinned commit",
    )
    f.set_defaults(func=cmd_fetch)
    return data


def _label_map(items: list[str]) -> dict[str, str] | None:
    if not items:
        return None
    out = {}
    for item in items:
        label, sep, cls = item.rpartition("=")
        if not sep or not label.strip() or cls.strip() not in ("faithful", "hallucinated", "ambiguous"):
            raise ValueError(f"--label-map expects LABEL=faithful|hallucinated|ambiguous, got {item!r}")
        out[label.strip()] = cls.strip()
    return out


def cmd_prepare(args: argparse.Namespace) -> int:
    from .benchmarks import load_benchmark
    from .io import SchemaError, print_error, read_conversations, write_conversations
    from .sampling import sample_conversations
    from .splits import LeakageError, drop_leaks, find_leaks

    try:
        options = {"split": args.split, "ambiguous": args.ambiguous, "on_error": args.on_error,
                   "label_map": _label_map(args.label_map), "wow": args.wow, "qrecc": args.qrecc,
                   "qrecc_passages": args.qrecc_passages, "responses": args.responses, "text": args.text,
                   "speakers": args.speakers, "turn_label": args.turn_label, "evidence": args.evidence,
                   "claims": args.claims}
        result = load_benchmark(args.benchmark, args.source, **options)
        report = result.report
        print(report.summary())
        for reason, count in report.rejected_by_reason().items():
            print(f"  rejected {count:>5}  {reason}")
        convs = result.conversations
        leaks = []
        if args.against:
            held_out = [c for f in args.against for c in read_conversations(f)]
            if args.drop_leaks:
                convs, leaks = drop_leaks(convs, held_out)
                print(f"dropped {len(leaks)} conversation(s) sharing a dialogue with "
                      f"{', '.join(args.against)}")
            else:
                found = find_leaks(held_out, convs)
                if found:
                    raise LeakageError(found)
        sample = sample_conversations(convs, args.n, args.seed)
        write_conversations(sample, args.out)
        if Path(args.out).suffix != ".jsonl":
            print("note: the authors' JSON keeps turns only (conversation ids, sources and meta are lost); "
                  "use .jsonl for this project's tools", file=sys.stderr)
        print(f"wrote {len(sample)} of {len(convs)} conversations to {args.out}"
              + (f" (sampled with seed {args.seed})" if len(sample) < len(convs) else ""))
        if args.report:
            from .io import atomic_write_text

            d = report.to_dict()
            d.update(sampled=len(sample), n=args.n, seed=args.seed, out=args.out,
                     leaks_dropped=[lk.test_id for lk in leaks])
            atomic_write_text(args.report, json.dumps(d, indent=1, ensure_ascii=False) + "\n")
        return 0
    except (SchemaError, LeakageError, ValueError, FileNotFoundError, RuntimeError) as e:
        print_error(e)
        return BAD_INPUT


def cmd_stats(args: argparse.Namespace) -> int:
    from .io import SchemaError, print_error, read_conversations
    from .stats import conversation_stats, format_stats

    try:
        convs = read_conversations(args.file)
    except (SchemaError, FileNotFoundError) as e:
        print_error(e)
        return BAD_INPUT
    stats = conversation_stats(convs)
    print(json.dumps(stats, indent=1) if args.json else format_stats(stats, str(Path(args.file))))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from .download import fetch

    try:
        sources = fetch.load_registry_file(args.registry) if args.registry else fetch.registry()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return BAD_INPUT
    if args.list:
        print("\n\n".join(fetch.describe(s) for s in sources.values()))
        return 0
    if not args.benchmarks:
        print(f"error: name the benchmark(s) to fetch ({', '.join(sources)}, or all); --list says where each "
              "comes from", file=sys.stderr)
        return BAD_INPUT
    from .root import ENV, data_root

    root = data_root(args.to or args.data_root)
    if root is None:
        print(f"error: say where to put the data: --to DIR (or set {ENV}=DIR)", file=sys.stderr)
        return BAD_INPUT
    return fetch.run(args.benchmarks, root, mirror=args.mirror, verify=not args.no_verify, force=args.force,
                     sources=sources)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m vista_distill.data.cli data stats FILE``) for testing."""
    parser = argparse.ArgumentParser(prog="vista-distill")
    add_data_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
