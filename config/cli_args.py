"""The one command-line parser for commands that read a recipe: ``vista-distill train``, ``eval``,
``distill``, ``check``, ``score`` and ``train/stage{1,2,3}.py``.

In the style of TRL's ``TrlParser`` (``trl/scripts/sft.py``): the typed dataclass config comes from the
YAML file given with ``--config``, and every setting can be overridden on the command line, either as
``--section.key value`` (one option per recipe field, generated from the
:class:`~vista_distill.config.Recipe` dataclasses, so ``--help`` lists them) or as ``section.key=value``
(deeper keys too: ``student.chat_template_kwargs.enable_thinking=true``). Values are YAML (``true``,
``[a, b]``, ``{k: v}``, numbers); the overrides apply in command-line order through
:func:`vista_distill.config.load_recipe`, so a later one wins.

    parser = RecipeParser(prog="train/stage2.py")          # a script
    recipe, args = parser.parse_args_and_config()

    p = add_recipe_subparser(subparsers, "train", help=...)  # a subcommand
    p.add_argument("--stage", ...)
    recipe = recipe_from_args(args)

``section.key=value`` overrides form one run: put them together (after the options, or before them).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from .loading import load_recipe
from .recipe import Recipe

OVERRIDES_EPILOG = ("Overrides: --section.key value or section.key=value (values are YAML), e.g. "
                    "--train.max_steps 50 lora.r=8; the key=value ones go together, after the options.")


def recipe_fields() -> Iterator[tuple[str, dataclasses.Field]]:
    """``(dotted key, field)`` of every recipe setting: ``train.max_steps``, ..., and top-level ``name``."""
    for section in dataclasses.fields(Recipe):
        if section.name == "path":          # where the recipe was read from, not a setting
            continue
        default = section.default_factory() if section.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            for f in dataclasses.fields(default):
                yield f"{section.name}.{f.name}", f
        else:
            yield section.name, section


class _Override(argparse.Action):
    """Records a recipe override in ``namespace.overrides``, in command-line order: an option as
    ``[--section.key, value]``, the positional run as its ``section.key=value`` strings."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        items = list(getattr(namespace, "overrides", None) or [])
        items += [option_string, values] if option_string is not None else list(values)
        namespace.overrides = items


class RecipeHelpFormatter(argparse.HelpFormatter):
    """A usage line without the one-per-field override options (``--help`` lists them by section)."""

    def add_usage(self, usage, actions, groups, prefix=None):  # type: ignore[override]
        shown = [a for a in actions if not (isinstance(a, _Override) and a.option_strings)]
        super().add_usage(usage, shown, groups, prefix)


def _help(f: dataclasses.Field) -> str:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    text = f"{kind}; default {f.default!r}" if f.default is not dataclasses.MISSING else kind
    return text.replace("%", "%%")


def add_recipe_arguments(parser: argparse.ArgumentParser, config_help: str = "recipe YAML (recipes/*.yaml)",
                         config_required: bool = True) -> argparse.ArgumentParser:
    """Add ``--config``, one ``--section.key`` option per recipe field and the ``section.key=value``
    positional run to ``parser``; :func:`recipe_from_args` reads them back."""
    parser.add_argument("--config", required=config_required, default=None, help=config_help)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for key, f in recipe_fields():
        section = key.split(".")[0] if "." in key else "recipe"
        if section not in groups:
            groups[section] = parser.add_argument_group(f"{section} overrides")
        group = groups[section]
        group.add_argument(f"--{key}", action=_Override, dest="overrides", default=argparse.SUPPRESS,
                           metavar="VALUE", help=_help(f))
        if "_" in key:   # --train.max-steps works too (config.parse_overrides reads - as _)
            group.add_argument(f"--{key.replace('_', '-')}", action=_Override, dest="overrides",
                               default=argparse.SUPPRESS, metavar="VALUE", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", action=_Override, default=None, metavar="section.key=value",
                        help="recipe overrides, e.g. train.learning_rate=1e-4 eval.systems=[base,llm_judge]")
    return parser


def add_recipe_subparser(subparsers: argparse._SubParsersAction, name: str, *,
                         config_help: str = "recipe YAML (recipes/*.yaml)", config_required: bool = True,
                         **kwargs: Any) -> argparse.ArgumentParser:
    """``subparsers.add_parser(name, **kwargs)`` with the recipe arguments (:func:`add_recipe_arguments`)."""
    kwargs.setdefault("epilog", OVERRIDES_EPILOG)
    kwargs.setdefault("formatter_class", RecipeHelpFormatter)
    return add_recipe_arguments(subparsers.add_parser(name, **kwargs), config_help, config_required)


def recipe_from_args(args: argparse.Namespace, first: Sequence[str] = ()) -> Recipe:
    """The recipe of parsed arguments: ``--config`` with the overrides applied (``first`` before the
    command line's), and ``--data-root`` when the command has one."""
    return load_recipe(args.config, [*first, *(getattr(args, "overrides", None) or [])],
                       data_root=getattr(args, "data_root", None))


class RecipeParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` with the recipe arguments (:func:`add_recipe_arguments`) for scripts;
    ``parse_args_and_config`` returns the typed recipe with the other arguments, like ``TrlParser``'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", OVERRIDES_EPILOG)
        kwargs.setdefault("formatter_class", RecipeHelpFormatter)
        super().__init__(*args, **kwargs)
        add_recipe_arguments(self)

    def parse_args_and_config(self, args: Sequence[str] | None = None) -> tuple[Recipe, argparse.Namespace]:
        """``(recipe, namespace)``: raises ``RecipeError`` or ``FileNotFoundError`` for a bad recipe."""
        ns = self.parse_args(args)
        return recipe_from_args(ns), ns
