"""``vista-distill distill --config recipes/X.yaml [section.key=value ...]``.

Exit codes: 0 done; 2 configuration, data or leak error; 3 the teacher server is absent or stopped
answering mid-run; 130 Ctrl-C (completed calls are cached: rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import sys

from ..runtime import exit_codes


def add_distill_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``distill`` to a top-level ``add_subparsers()`` object."""
    from ..config.cli_args import add_recipe_subparser

    p = add_recipe_subparser(
        subparsers,
        "distill",
        config_help="recipe YAML (teacher, data, distill sections)",
        help="run the teacher over a recipe's training material and export silver data per stage",
        description="Run the VISTA prompts with the recipe's teacher (OpenAI-compatible server, local model or "
        "human labels) over the train material, cache every call, filter, and export stage1/ stage2/ "
        "stage3/ datasets with a manifest. Rerunning resumes from the cache.",
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N train conversations")
    p.add_argument("--output-dir", default=None, help="override distill.output_dir")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.add_argument(
        "--data-root",
        default=None,
        metavar="DIR",
        help="folder the recipe's data sources are relative to (default: data.root, else $VISTA_DISTILL_DATA)",
    )
    p.add_argument("--push-to-hub", metavar="REPO", default=None,
                   help="then push the silver datasets (dataset cards included, the teacher's call cache not) to a "
                        "Hub dataset repo id, or a local folder (file://PATH)")
    p.set_defaults(func=cmd_distill)
    return p


def cmd_distill(args: argparse.Namespace) -> int:
    from ..config import RecipeError
    from ..config.cli_args import recipe_from_args
    from ..data.io import SchemaError, print_error
    from ..data.splits import LeakageError
    from .run import ServerError, ServerUnavailable, run_distill

    try:
        recipe = recipe_from_args(args)
        result = run_distill(recipe, limit=args.limit, progress=not args.no_progress, output_dir=args.output_dir)
    except (ServerUnavailable, ServerError) as e:
        print(f"stopped: {e}", file=sys.stderr)
        return exit_codes.SERVER
    except KeyboardInterrupt:
        print("interrupted: completed teacher calls are cached; rerun the same command to resume", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except (SchemaError, LeakageError, RecipeError, ValueError) as e:
        print_error(e)
        return exit_codes.BAD_INPUT
    m, r = result.manifest, result.run
    print(f"teacher {m['teacher']}: {r['requests']} requests, {r['cache_hits']} cache hits, "
          f"{r['calls']} new calls, {r['failures']} failures, {r['retries']} retries, "
          f"{r['parse_failures']} parse failures in {r['wall_s']:.1f}s")
    if r.get("cache_unreadable"):
        print(f"  cache: {r['cache_unreadable']} unreadable entr(y/ies) called again and rewritten (see the log)")
    dropped = ", ".join(f"{k} {v}" for k, v in r.get("claims_dropped", {}).items()) or "none"
    print(f"  stage 1: {r.get('stage1_truncated_turns', 0)} answer(s) still cut at the token budget after a retry; "
          f"claims dropped: {dropped}")
    from ..runtime.progress import print_table

    rows = []
    for stage, rep in m["filters"]["report"].items():
        c = m["counts"][stage]
        rows.append([stage, rep["candidates"], rep["kept"],
                     ", ".join(f"{k} {v}" for k, v in rep["dropped"].items()) or "none",
                     c["train"]["examples"], c["validation"]["examples"],
                     ", ".join(f"{k} {v}" for k, v in c["train"]["labels"].items()) or "-"])
    print_table(f"silver data: {result.out_dir} (fingerprint {m['fingerprint'][:16]})",
                ["stage", "candidates", "kept", "dropped", "train", "validation", "train labels"], rows)
    if getattr(args, "push_to_hub", None):
        from ..publish.hub import push

        print(f"pushed {result.out_dir} -> {push(result.out_dir, args.push_to_hub, repo_type='dataset')}")
    return 0
