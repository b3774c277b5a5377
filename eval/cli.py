"""``vista-distill eval --config recipes/X.yaml [--input FILE] [--limit N] [section.key=value ...]``.

Exit codes: 0 done (skipped systems are listed, with their reasons); 2 configuration or material error.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from ..config.cli_args import add_recipe_subparser, recipe_from_args
from ..runtime.numbers import number


def add_eval_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``eval`` to a top-level ``add_subparsers()`` object."""
    p = add_recipe_subparser(
        subparsers, "eval",
        help="evaluate student, base, teacher and baselines with significance, speed and a report",
        description="Score the test material with the recipe's eval.systems (student = base model + stage "
                    "adapters, base = untuned few-shot, teacher = cached or live, llm_judge, factscore); write "
                    "results.json, report.md and plots into eval.output_dir.",
        epilog="Overrides: --section.key value or section.key=value (values are YAML; the key=value ones "
               "go together, after the options), e.g. --eval.seed 1 eval.systems=[base,llm_judge] "
               "eval.mcnemar=chi2")
    p.add_argument("--input", default=None,
                   help="test conversations (authors' .json or our .jsonl); default: the recipe's data.test")
    p.add_argument("--limit", type=int, default=None, help="only the first N test conversations")
    p.add_argument("--systems", default=None, help="comma-separated subset of eval.systems")
    p.add_argument("--output-dir", default=None, help="override eval.output_dir")
    p.add_argument("--compare", default=None, metavar="RESULTS_JSON",
                   help="an earlier results.json: report whether metrics, tests and intervals are identical")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--data-root",
        default=None,
        metavar="DIR",
        help="folder the recipe's data sources are relative to (default: data.root, else $VISTA_DISTILL_DATA)",
    )
    p.set_defaults(func=cmd_eval)
    return p


def _announce(run) -> None:
    parts = [f"whole pipeline {run.efficiency.get('wall_s') or 0:.0f}s"] if run.records else []
    parts += [f"claim level {run.given_wall_s:.0f}s"] if run.given_records else []
    print(f"[eval] {run.name}: {run.status}" + (f" ({', '.join(parts)})" if parts else "")
          + (f" ({run.reason})" if run.reason else ""), file=sys.stderr, flush=True)


def cmd_eval(args: argparse.Namespace) -> int:
    from ..config import RecipeError
    from ..data.splits import LeakageError
    from .errors import EvalError
    from .run import EvalProgress, run_eval

    try:
        recipe = recipe_from_args(args)   # --config, overrides and --data-root
        result = run_eval(recipe, input_path=args.input, limit=args.limit,
                          systems=args.systems.split(",") if args.systems else None, output_dir=args.output_dir,
                          compare=args.compare, progress=EvalProgress(not args.no_progress, _announce))
    except (EvalError, RecipeError, LeakageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_eval_summary(result)
    return 0


def print_eval_summary(result: Any) -> None:
    """``vista-distill eval``'s closing tables (each within 100 columns; report.md keeps every figure) and paths."""
    from ..runtime.progress import print_table
    from ..scoring.metrics import OVERALL

    r = result.results
    m = r["material"]
    rule = r["settings"]["rules"][0]
    given = (r.get("given_claims") or {}).get("systems", {})
    rows = []
    for name, s in r["systems"].items():
        if s["status"] != "ok":
            rows.append([name, f"{s['status']}: {s['reason']}", None, None, None, None, None, None])
            continue
        on_given = _fmt(((given.get(name) or {}).get(OVERALL) or {}).get("binary_accuracy"))
        wall = s["efficiency"].get("wall_s", 0) + s.get("claim_level_wall_s", 0)
        if name not in r["metrics"]:   # eval.claim_level_only: stages 2-3 on the human claims, no turn of its own
            rows.append([name, "claim level only", None, None, None, None, on_given, f"{wall:.0f}"])
            continue
        t = r["metrics"][name][OVERALL]["turn"][rule]
        c = r["metrics"][name][OVERALL].get("claim") or {}
        rows.append([name, "ok", _fmt(t.get("accuracy")), _fmt(t.get("coverage")), _fmt(t.get("accuracy_common")),
                     _fmt(c.get("accuracy")), on_given, f"{wall:.0f}"])
    print_table(f"evaluated {m['conversations']} conversations ({m['gold_turns']} gold turns, {m['human_claims']} "
                f"human claims) in {r['wall_s']:.0f}s",
                ["system", "status", f"turn acc\n({rule})", "coverage", "acc, turns\nall scored", "claim\nacc",
                 "stage 2,\nhuman claims", "wall s"],
                rows, max_width={1: 16})
    if "world" in r:   # three-way verdicts (FHSumBench): the mixed-context study's metric beside its published rows
        w = r["world"]
        rows = [[name, *(f"{x:.4f}" for x in (m["macro_precision"], m["macro_recall"], m["macro_f1"],
                                               *m["label_accuracy"].values())), m["unknown"], m["n"]]
                for name, m in w["systems"].items()]
        print_table("three-way verdicts", ["system", "macro\nP", "macro\nR", "macro\nF1", "acc\nfaithful",
                                           "acc\nfactual", "acc non-\nfactual", "unknown", "turns"], rows,
                    max_width={0: 30})
        print(textwrap.fill("macro over faithful / factual / non-factual hallucination; " + w["note"], width=100))
        print_table("the study's published macro F1", ["system", "macro F1"],
                    [[f"published: {name}", f"{f1:.4f}"] for name, f1 in w["published_macro_f1"].items()])
    if "compare" in r:
        print(f"compare with {r['compare']['previous']}: "
              + ("identical" if r["compare"]["identical"] else f"DIFFERENT ({len(r['compare']['differences'])} "
                 "differences, see report.md)"))
    print(f"report:  {result.out_dir / 'report.md'}\nresults: {result.out_dir / 'results.json'}\n"
          f"page:    {result.out_dir / 'report.html'}")


def _fmt(x: float | None) -> str | None:
    return None if x is None else number(x, 3)
