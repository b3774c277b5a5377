"""``vista-distill train --config recipes/X.yaml --stage all|stage1|stage2|stage3 [overrides]``."""

from __future__ import annotations

import argparse


def add_train_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train`` on the ``vista-distill`` parser."""
    from .sft import STAGES, OverridesParser

    p = subparsers.add_parser(
        "train", help="train the stage LoRA adapters from the recipe's silver data",
        description="Train one LoRA/QLoRA adapter per stage (TRL SFTTrainer + PEFT) into "
                    "<train.output_dir>/<stage>/, in order; a rerun resumes from the last checkpoint. "
                    "Multi-GPU: accelerate launch --config_file recipes/accelerate/ddp.yaml "
                    "train/stage2.py ...",
        epilog="Overrides: --section.key value or section.key=value, e.g. --train.max_steps 50 lora.r=8",
    )
    # Unknown arguments are recipe overrides, not errors (see OverridesParser).
    p.__class__ = OverridesParser
    p.add_argument("--config", required=True, help="recipe YAML (recipes/*.yaml)")
    p.add_argument("--stage", default="all", choices=("all", *STAGES),
                   help="all = the recipe's train.stages in order (default)")
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    import sys

    from ..config import RecipeError, load_recipe
    from .sft import TrainError, train_stages

    try:
        recipe = load_recipe(args.config, args.overrides)
        summaries = train_stages(recipe, args.stage)
    except (TrainError, RecipeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in summaries:
        r = s["results"]
        ev = (f", eval loss {r['first_eval_loss']:.4f} -> {r['final_eval_loss']:.4f}"
              if r["final_eval_loss"] is not None else "")
        print(f"[{s['stage']}] {r['global_step']} steps{ev}; adapter: {s['output_dir']}")
    return 0
