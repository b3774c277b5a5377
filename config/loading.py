"""Reading a recipe: YAML plus dotted overrides into :class:`~.recipe.Recipe`, every key checked.

Unknown keys are errors that name the file and the key. CLI overrides use dotted names, TRL-parser style:
``--train.learning_rate 1e-4`` or ``train.learning_rate=1e-4`` (values are parsed as YAML, so ``true``,
``[a, b]`` and numbers work).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from ..data.vocabulary import ALL_STAGES
from ..pipeline.templates import PROMPT_NAMES
from .recipe import Recipe, RecipeError, TrainSettings
from .validate import range_problem, read_yaml, type_problem

# keys of earlier recipes: where each went (a recipe that still has one fails with this message)
_TO_PIPELINE = "moved to the pipeline section (pipeline.{key}), read by distill, train, eval and score"
MOVED = {
    "DistillConfig.speakers": _TO_PIPELINE.format(key="speakers"),
    "DistillConfig.max_claims": _TO_PIPELINE.format(key="max_claims"),
    "DistillConfig.student_prompt_style": _TO_PIPELINE.format(key="student_prompt_style"),
    "EvalSettings.max_new_tokens": _TO_PIPELINE.format(key="max_new_tokens"),
    **{f"{c}.options": "removed: nothing ever read it (loader options go in data.train[].options, TRL fields in "
                       "train.options)" for c in ("TeacherConfig", "DistillConfig", "EvalSettings")},
}


def _sub(where: str, key: str) -> str:
    """``recipe.yaml: section.key``: the file, then the dotted key."""
    return f"{where}.{key}" if ": " in where else f"{where}: {key}"


def _build(cls: type, raw: Any, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    if dataclasses.is_dataclass(cls):
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise RecipeError(f"{where}: expected a mapping for {cls.__name__}, got {type(raw).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.name != "path"}
        for key in sorted(set(raw) - names):
            moved = MOVED.get(f"{cls.__name__}.{key}")
            if moved:
                raise RecipeError(f"{_sub(where, key)}: {moved}")
        unknown = sorted(set(raw) - names)
        if unknown:
            raise RecipeError(f"{where}: unknown key(s) {unknown}; valid: {sorted(names)}")
        kwargs, problems = {}, []
        for k, v in raw.items():   # every field's problem, not only the first (check lists them all)
            try:
                kwargs[k] = _coerce(hints[k], v, _sub(where, k))
            except RecipeError as e:
                problems += e.problems
                continue
            if problem := range_problem(f"{cls.__name__}.{k}", kwargs[k], _sub(where, k)):
                problems.append(problem)
        if problems:
            raise RecipeError(problems[0], problems)
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise RecipeError(f"{where}: {e}") from e
    return raw


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    optional = origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args
    if optional and value is None:
        return None
    if optional:
        return _coerce(next(a for a in args if a is not type(None)), value, where)
    if origin is list and args == (str,) and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]   # a=x,y on the command line
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, list):
            raise RecipeError(f"{where}: expected a list, got {type(value).__name__}")
        return [_build(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except (ValueError, OverflowError) as e:
            raise RecipeError(f"{where}: expected a number, got {value!r}") from e
    if tp is int and isinstance(value, str):
        try:
            return int(value)
        except ValueError as e:
            raise RecipeError(f"{where}: expected an integer, got {value!r}") from e
    if problem := type_problem(tp, value, where):
        raise RecipeError(problem)
    return value


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """``['--train.lr', '1e-4', 'eval.seed=3']`` -> nested dict."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" not in arg:
            if i + 1 >= len(args):
                raise RecipeError(f"override {arg} has no value")
            key, value, i = arg[2:], args[i + 1], i + 2
        else:
            key, sep, value = arg.lstrip("-").partition("=")
            if not sep:
                raise RecipeError(f"override {arg!r}: expected section.key=value or --section.key value")
            i += 1
        node = out
        *parents, leaf = key.replace("-", "_").split(".")
        for p in parents:
            node = node.setdefault(p, {})
        try:
            node[leaf] = read_yaml(value.encode("utf-8", "surrogateescape"), f"override {key}")
        except ValueError as e:
            raise RecipeError(str(e)) from None
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        # an empty mapping replaces (``teacher.chat_template_kwargs={}`` clears it); others merge key by key
        merged[k] = _merge(merged[k], v) if isinstance(v, dict) and v and isinstance(merged.get(k), dict) else v
    return merged


def load_recipe(path: str | Path | None, overrides: list[str] | None = None,
                data_root: str | None = None) -> Recipe:
    """Load a recipe YAML (or defaults when ``path`` is None) and apply dotted CLI overrides;
    ``data_root`` (``--data-root``) sets ``data.root``."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: recipe not found")
        try:
            raw = read_yaml(path.read_bytes(), str(path)) or {}
        except OSError as e:
            raise RecipeError(f"{path}: cannot be read ({e.strerror or e})") from None
        except ValueError as e:
            raise RecipeError(str(e)) from None
        if not isinstance(raw, dict):
            raise RecipeError(f"{path}: expected a mapping at the top level")
        raw.setdefault("name", path.stem)
    raw = _merge(raw, parse_overrides(overrides or []))
    where = str(path) if path else "<recipe>"
    recipe = _build(Recipe, raw, where)
    recipe.path = str(path) if path else None
    if data_root:
        recipe.data.root = str(data_root)
    _check_hardware_fields(recipe, where)
    _check_per_stage(recipe, where)
    return recipe


def _check_per_stage(recipe: Recipe, where: str) -> None:
    """``train.per_stage`` names known stages and train keys, each value of its field's type."""
    import dataclasses

    from ..data.vocabulary import DISTILLED_STAGES

    if not isinstance(recipe.train.per_stage, dict):
        raise RecipeError(f"{where}: train.per_stage: expected a mapping of stage -> train keys, got "
                          f"{type(recipe.train.per_stage).__name__}")
    for stage, extra in recipe.train.per_stage.items():
        if stage not in DISTILLED_STAGES:
            stage = stage if str(stage).isprintable() else json.dumps(str(stage))[1:-1]
            raise RecipeError(f"{where}: train.per_stage.{stage}: unknown stage; expected one of "
                              f"{list(DISTILLED_STAGES)}")
        if not isinstance(extra, dict):
            raise RecipeError(f"{where}: train.per_stage.{stage}: expected a mapping of train keys")
        raw = {k: v for k, v in dataclasses.asdict(recipe.train).items() if k != "per_stage"}
        unknown = set(extra) - set(raw)
        if unknown or "per_stage" in extra:
            raise RecipeError(f"{where}: train.per_stage.{stage}: {sorted(unknown | ({'per_stage'} & set(extra)))} "
                              f"are not train keys")
        _build(TrainSettings, {**raw, **extra}, f"{where}: train.per_stage.{stage}")


def _check_hardware_fields(recipe: Recipe, where: str) -> None:
    """Precision and thread settings are checked when the recipe is read, not when a model loads."""
    from ..runtime.hardware import choose_threads, normalize_dtype

    for section, key in (("teacher", "dtype"), ("student", "dtype")):
        try:
            normalize_dtype(getattr(getattr(recipe, section), key), f"{where}: {section}.{key}")
        except ValueError as e:
            raise RecipeError(str(e)) from None
    for key, valid in (("teacher.max_new_tokens", ALL_STAGES), ("pipeline.max_new_tokens", PROMPT_NAMES)):
        section, field_name = key.split(".")
        unknown = sorted(set(getattr(getattr(recipe, section), field_name)) - set(valid))
        if unknown:
            raise RecipeError(f"{where}: {key}: unknown stage(s) {unknown}; valid: {', '.join(valid)}")
    for key, value in (("train.bf16", recipe.train.bf16), ("student.merge_adapters", recipe.student.merge_adapters)):
        if not (value == "auto" or isinstance(value, bool)):
            raise RecipeError(f"{where}: {key} {value!r}; expected auto, true or false")
    for section, key in (("teacher", "threads"), ("train", "cpu_threads"), ("eval", "threads")):
        value = getattr(getattr(recipe, section), key)
        try:
            if value is not None:
                choose_threads(value, 1, None)
        except ValueError:
            raise RecipeError(f"{where}: {section}.{key} {value!r}; expected auto or a positive integer") from None
