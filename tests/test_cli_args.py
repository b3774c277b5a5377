"""cli_args: the one recipe parser of ``vista-distill train``, ``vista-distill eval`` and
``train/stage{1,2,3}.py``: ``--config`` plus ``--section.key value`` / ``section.key=value`` overrides."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from helpers import ROOT

from vista_distill.config import Recipe, RecipeError
from vista_distill.config.cli_args import RecipeParser, add_recipe_subparser, recipe_fields, recipe_from_args

EVAL_RECIPE = str(ROOT / "recipes" / "smollm2-135m-cpu.yaml")


def test_both_override_forms_apply_in_command_line_order():
    recipe, args = RecipeParser(prog="t").parse_args_and_config(
        ["--config", EVAL_RECIPE, "--train.max_steps", "50", "lora.r=8", "train.max-steps=3",
         "student.chat_template_kwargs.enable_thinking=true"])
    assert args.overrides == ["--train.max_steps", "50", "lora.r=8", "train.max-steps=3",
                              "student.chat_template_kwargs.enable_thinking=true"]
    assert (recipe.train.max_steps, recipe.lora.r) == (3, 8)
    assert recipe.student.chat_template_kwargs == {"enable_thinking": True}
    recipe, _ = RecipeParser(prog="t").parse_args_and_config(
        ["--config", EVAL_RECIPE, "lora.r=8", "--train.max-steps", "7", "--train.seed=-1", "--name", "other"])
    assert (recipe.train.max_steps, recipe.lora.r, recipe.train.seed, recipe.name) == (7, 8, -1, "other")
    recipe, args = RecipeParser(prog="t").parse_args_and_config(["--config", EVAL_RECIPE])
    assert not args.overrides and recipe.name == "smollm2-135m-cpu"


def test_every_recipe_field_has_an_option_and_unknown_ones_are_refused(capsys):
    keys = {key for key, _ in recipe_fields()}
    for section in dataclasses.fields(Recipe):
        settings = getattr(Recipe(), section.name)
        if dataclasses.is_dataclass(settings):
            assert {f"{section.name}.{f.name}" for f in dataclasses.fields(settings)} <= keys
    assert "path" not in keys and "name" in keys
    with pytest.raises(SystemExit) as e:
        RecipeParser(prog="t").parse_args(["--config", EVAL_RECIPE, "--train.no_such_key", "1"])
    assert e.value.code == 2 and "--train.no_such_key" in capsys.readouterr().err
    with pytest.raises(RecipeError, match="no_such_key"):
        RecipeParser(prog="t").parse_args_and_config(["--config", EVAL_RECIPE, "train.no_such_key=1"])


def test_help_lists_options_by_section_and_keeps_the_usage_line_short():
    parser = RecipeParser(prog="train/stage2.py")
    usage, text = parser.format_usage(), parser.format_help()
    assert "--config CONFIG" in usage and "--train.max_steps" not in usage
    assert "train overrides:" in text and "--train.max_steps VALUE" in text and "--lora.r VALUE" in text
    assert "--train.max-steps" not in text   # the hyphenated spelling works without being listed


def test_subcommands_use_plain_parsers_with_the_same_arguments():
    from vista_distill.cli import build_parser

    top = build_parser()
    args = top.parse_args(["train", "--config", EVAL_RECIPE, "--stage", "stage2", "--train.max_steps", "5",
                           "lora.r=4"])
    recipe = recipe_from_args(args)
    assert (args.stage, recipe.train.max_steps, recipe.lora.r) == ("stage2", 5, 4)
    args = top.parse_args(["eval", "--config", EVAL_RECIPE, "--limit", "2", "--data-root", "/data",
                           "--eval.seed", "3", "eval.bootstrap=10"])
    recipe = recipe_from_args(args)
    assert (args.limit, recipe.data.root, recipe.eval.seed, recipe.eval.bootstrap) == (2, "/data", 3, 10)
    sub = argparse.ArgumentParser().add_subparsers()
    assert type(add_recipe_subparser(sub, "x")) is argparse.ArgumentParser


def test_every_subcommand_prints_its_help():
    from vista_distill.cli import build_parser

    top = build_parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"demo", "score", "eval", "train", "distill", "calibrate"} <= set(commands)
    for name, parser in commands.items():
        text = parser.format_help()   # argparse expands '%' in help strings here, not when it is declared
        assert parser.prog.endswith(name) and "usage:" in text, name
