"""``vista-distill`` command line: ``score``, ``demo``, ``data``, ``distill``, ``train``, ``eval``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score dialogues with the VISTA pipeline on a local model",
                       description="Score every assistant turn of the input dialogues with VISTA.")
    p.add_argument("--input", required=True, help="conversations: authors' .json or our .jsonl")
    p.add_argument("--output", required=True, help="per-turn records (.jsonl); the summary goes beside it")
    p.add_argument("--config", default=None,
                   help="a recipe: its student (model, dtype, 4-bit, attention, chat-template variables) and its "
                        "trained adapters (train.output_dir) are the defaults of the options below")
    p.add_argument("--model", default=None, help="path or hub id of a causal LM (default: embedded SmolLM2-135M)")
    p.add_argument("--adapters", default=None, help="folder with stage1/ stage2/ stage3/ PEFT adapters")
    p.add_argument("--rule", choices=("safe", "strict", "authors"), default="safe",
                   help="headline turn rule (all are computed): safe = VERIFIED/ABSTENTION/OUT-OF-SCOPE are safe, "
                        "unparseable or claimless turns unknown; strict = only VERIFIED (paper Table 1 text); "
                        "authors = the released evaluation (see README)")
    p.add_argument("--chat-template-kwargs", default=None, metavar="JSON",
                   help='variables for the chat template (default {"enable_thinking": false}: reasoning models answer '
                        "directly)")
    p.add_argument("--prompts", choices=("fewshot", "compact"), default=None,
                   help="prompt style (default: fewshot, or compact when --adapters is given)")
    p.add_argument("--stage2", choices=("score", "generate"), default="score",
                   help="score = pick the label by log-likelihood; generate = free text, parsed")
    p.add_argument("--stage3", choices=("score", "generate"), default="score",
                   help="generate keeps the model's explanation")
    p.add_argument("--stage4", action="store_true", help="also ask whether each turn contradicts earlier turns")
    p.add_argument("--speakers", default="apprentice,wizard",
                   help="user,assistant speaker names in prompts (appendix: apprentice,wizard)")
    p.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32", "float16"),
                   help="auto (default): bf16 where the device computes it natively, else float16 on a GPU, "
                        "float32 on a CPU")
    p.add_argument("--threads", default="auto",
                   help="torch CPU threads: auto (default: the cores not busy with other work) or a number")
    p.add_argument("--load-in-4bit", action="store_true", help="4-bit NF4 weights through bitsandbytes")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-claims", type=int, default=16)
    p.add_argument("--max-new-tokens", action="append", default=[], metavar="STAGE=N",
                   help="generation budget per stage, e.g. stage1=128 (defaults: stage1 256, stage3 96)")
    p.add_argument("--limit", type=int, default=None, help="score only the first N conversations")
    p.add_argument("--one-at-a-time", action="store_true", help="one request per call, like the authors' loop")
    p.set_defaults(func=_score)


def _score(args: argparse.Namespace) -> int:
    from .data.io import read_conversations
    from .hardware import prepare_run
    from .pipeline.prompts import Speakers
    from .scorer import VistaScorer

    conversations = read_conversations(args.input)[: args.limit]   # bad input fails before torch loads
    try:
        prepare_run(args.dtype, args.threads, where="--dtype")  # says what it will use, first
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    user, _, agent = args.speakers.partition(",")
    student = _student_from_recipe(args)
    scorer = VistaScorer(
        rule=args.rule, style=args.prompts, stage2=args.stage2,
        stage3=args.stage3, stage4=args.stage4, speakers=Speakers(user=user, assistant=agent or "wizard"),
        threads=args.threads, batch_size=args.batch_size,
        max_claims=args.max_claims, max_new_tokens=_stage_ints(args.max_new_tokens), **student,
    )
    result = scorer.score(conversations, batched=not args.one_at_a_time, progress=True)
    out, summary_path = result.write(args.output)
    s = result.summary
    print(f"scored {s['scored_turns']} turns in {s['conversations']} conversations "
          f"({s['context_turns']} context turns) in {s['run']['wall_s']:.0f}s")
    for rule, r in s["by_rule"].items():
        gold = r["gold"]
        acc = f", accuracy {gold['accuracy']:.3f} on {gold['n']}/{gold['n_gold']} gold turns" if gold and "accuracy" in gold else ""
        print(f"  rule {rule:6s}: coverage {r['coverage']:.3f}, verdicts {r['verdicts']}{acc}")
    print(f"records: {out}\nsummary: {summary_path}")
    return 0


def _student_from_recipe(args: argparse.Namespace) -> dict:
    """Model settings: the command line first, then the recipe's student and adapters (``--config``)."""
    out = {"model": args.model, "adapters": args.adapters, "dtype": args.dtype, "load_in_4bit": args.load_in_4bit,
           "chat_template_kwargs": None, "attn_implementation": None}
    if args.config:
        from .config import load_recipe

        recipe = load_recipe(args.config)
        s = recipe.student
        trained = Path(recipe.resolve(recipe.train.output_dir))
        out.update(model=args.model or s.model, dtype=s.dtype if args.dtype == "auto" else args.dtype,
                   load_in_4bit=args.load_in_4bit or s.load_in_4bit, attn_implementation=s.attn_implementation,
                   chat_template_kwargs=s.chat_template_kwargs,
                   adapters=args.adapters or (str(trained) if trained.is_dir() else None))
    if args.chat_template_kwargs:
        try:
            out["chat_template_kwargs"] = json.loads(args.chat_template_kwargs)
        except json.JSONDecodeError as e:
            raise SystemExit(f"error: --chat-template-kwargs is not JSON ({e}): {args.chat_template_kwargs!r}") from None
    return out


def _stage_ints(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        stage, sep, n = pair.partition("=")
        if not sep or not n.isdigit() or stage not in ("stage1", "stage2", "stage3", "stage4"):
            raise SystemExit(f"error: --max-new-tokens expects STAGE=N with STAGE in stage1..stage4, got {pair!r}")
        out[stage] = int(n)
    return out


def _add_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="preflight a recipe before any large model loads: hardware, data, leaks, "
                                     "chat templates, thinking, GPU memory, teacher endpoint",
                       description="Everything the recipe needs short of loading the large models; one line per "
                                   "problem, exit 1 when there is any.")
    p.add_argument("--config", default=None, help="recipe YAML (default: the built-in defaults)")
    p.add_argument("--data-root", default=None, metavar="DIR",
                   help="folder the recipe's data sources are relative to (default: data.root, else $VISTA_DISTILL_DATA)")
    p.add_argument("--online", action="store_true", help="also send the teacher endpoint one real request")
    p.add_argument("overrides", nargs="*", metavar="section.key=value", help="recipe overrides")
    p.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    from .config import load_recipe
    from .preflight import run_checks

    recipe = load_recipe(args.config, args.overrides, data_root=args.data_root)
    return 1 if run_checks(recipe, online=args.online).problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vista-distill", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_score(sub)
    _add_check(sub)
    from .demo import add_demo_subcommand

    add_demo_subcommand(sub)
    from .data.cli import add_data_subcommands

    add_data_subcommands(sub)
    from .distill.cli import add_distill_subcommand

    add_distill_subcommand(sub)
    from .train.cli import add_train_subcommand

    add_train_subcommand(sub)
    from .eval.cli import add_eval_subcommand

    add_eval_subcommand(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    from .config import RecipeError
    from .data.io import SchemaError

    try:
        return args.func(args)
    except SchemaError as e:  # every problem of the input, one plain line each
        for line in e.lines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (RecipeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
