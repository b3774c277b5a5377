"""The command lines of train/: ``vista-distill train --config recipes/X.yaml --stage all|stage1|stage2|stage3
[overrides]`` and the scripts ``train/stage{1,2,3}.py --config recipes/X.yaml [overrides]`` (also under
``accelerate launch``), in the style of TRL's ``trl/scripts/sft.py``: a typed recipe from one YAML file plus
dotted overrides (:mod:`vista_distill.config.cli_args`), heavy imports inside functions.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..config.cli_args import RecipeParser, add_recipe_subparser, recipe_from_args
from ..data.vocabulary import DISTILLED_STAGES

MULTI_GPU = ("Multi-GPU: accelerate launch --config_file recipes/accelerate/ddp.yaml train/stage2.py "
             "--config recipes/X.yaml")


def add_train_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train`` on the ``vista-distill`` parser."""
    p = add_recipe_subparser(
        subparsers, "train", help="train the stage LoRA adapters from the recipe's silver data",
        description="Train one LoRA/QLoRA adapter per stage (TRL SFTTrainer + PEFT) into "
                    "<train.output_dir>/<stage>/, in order; a rerun resumes from the last checkpoint. "
                    + MULTI_GPU,
    )
    p.add_argument("--stage", default="all", choices=("all", *DISTILLED_STAGES),
                   help="all = the recipe's train.stages in order (default)")
    p.add_argument("--push-to-hub", metavar="REPO", default=None,
                   help="then push the adapters (cards included, checkpoints not) to a Hub repo id, or a local "
                        "folder (file://PATH)")
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace, stage: str | None = None) -> int:
    """Load the recipe of parsed arguments and train ``stage`` (default ``args.stage``; ``all``: the
    recipe's train.stages); prints one line per trained stage (first process only). Exit code 2 on a bad
    recipe or silver data."""
    from ..config import RecipeError
    from ..data.silver import SilverDataError
    from .run import train_stages

    try:
        summaries = train_stages(recipe_from_args(args), stage or args.stage)
    except (SilverDataError, RecipeError, FileNotFoundError) as e:   # train's TrainError is one too
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in summaries:
        r = s["results"]
        ev = (f", eval loss {r['first_eval_loss']:.4f} -> {r['final_eval_loss']:.4f}"
              if r["final_eval_loss"] is not None else "")
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"[{s['stage']}] {r['global_step']} steps{ev}; adapter: {s['output_dir']}")
    repo = getattr(args, "push_to_hub", None)
    if repo and summaries and int(os.environ.get("RANK", "0")) == 0:
        from ..publish.hub import push

        where = push(Path(summaries[0]["output_dir"]).parent, repo)
        print(f"pushed {Path(summaries[0]['output_dir']).parent} -> {where}")
    return 0


def main(stage: str | None = None, argv: Sequence[str] | None = None) -> int:
    """``python train/stage2.py --config R.yaml [overrides]`` (``stage`` None: ``--stage`` chooses)."""
    parser = RecipeParser(
        prog=f"train/{stage}.py" if stage else "python -m vista_distill.train.cli",
        description=f"Train the {stage or 'stage'} LoRA adapter from a recipe's silver data. {MULTI_GPU}",
    )
    if stage is None:
        parser.add_argument("--stage", default="all", choices=("all", *DISTILLED_STAGES))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_train(args, stage)


if __name__ == "__main__":
    sys.exit(main())
