"""Every recipe value checked against its field's declared type and range, and the YAML read safely, before anything
runs.

A small validator over the dataclasses' own annotations rather than pydantic models: the recipe stays plain
dataclasses (read by every command, rendered into docs/recipe.md from their source comments), and the checks need only
what the annotations already say (int, float, bool, str, Literal, unions, lists, mappings) plus the ranges below.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any, Literal

import yaml

# the range of a number, by ``Class.field``: (lowest, highest, whether the highest is allowed); a number not named
# here must be >= 0 (a seed: any integer); every float must be finite
RANGES: dict[str, tuple[float, float | None, bool]] = {
    **{f: (1, None, True) for f in (
        "DataSource.n", "TeacherConfig.concurrency", "TeacherConfig.batch_size", "WorldConfig.top_k",
        "PipelineConfig.max_claims", "PipelineConfig.context_budget", "DistillConfig.self_consistency_k",
        "ServingSettings.top_logprobs", "ServingSettings.concurrency", "ServingSettings.echo_concurrency",
        "LoraSettings.r", "LoraSettings.alpha", "TrainSettings.per_device_train_batch_size",
        "TrainSettings.gradient_accumulation_steps", "TrainSettings.micro_batch_size", "TrainSettings.max_length",
        "TrainSettings.logging_steps", "TrainSettings.save_steps", "TrainSettings.save_total_limit",
        "EvalSettings.batch_size", "EvalSettings.round_size", "EvalSettings.calibration_bins",
        "EvalSettings.evidence_conversations", "DistillConfig.balance_max_ratio", "TrainSettings.class_weight_cap")},
    **{f: (math.ulp(0.0), None, True) for f in (
        "TeacherConfig.timeout_s", "ServingSettings.timeout_s", "TrainSettings.learning_rate",
        "TrainSettings.num_train_epochs", "TrainSettings.max_minutes", "EvalSettings.max_minutes")},
    **{f: (0, 1, False) for f in ("DataConfig.test_fraction", "DistillConfig.validation_fraction",
                                  "LoraSettings.dropout")},
    **{f: (0, 1, True) for f in ("DistillConfig.self_consistency_min_agreement", "DistillConfig.augment_swapped",
                                 "DistillConfig.evidence_contrast", "EvalSettings.match_threshold")},
    "TrainSettings.max_steps": (-1, None, True),
    "LoraSettings.layers_to_transform": (-(2**16), 2**16, True),
}
MAX_DEPTH = 40     # nesting of a recipe's YAML (a real one has four levels)
MAX_ALIASES = 64   # uses of YAML anchors (&a / *a): a few keep a recipe short; more only blow it up


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses deep nesting and many alias uses (an alias bomb expands to millions of
    nodes from a few lines) before building anything."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth, self._aliases = 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} uses of YAML aliases (*name): refused")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels: refused")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_yaml(data: bytes, where: str) -> Any:
    """A recipe file's YAML: UTF-8 text (a BOM allowed), nesting and aliases bounded; ``ValueError`` naming the file
    and the problem in one line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); save the "
                         "recipe as UTF-8") from None
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise ValueError(f"{where}: not valid YAML ({_yaml_problem(e)})") from None
    except (ValueError, TypeError, OverflowError, AttributeError, KeyError, IndexError) as e:
        # SafeLoader's own constructors on a bad value: !!float abc, !!int x, !!timestamp 99
        raise ValueError(f"{where}: not valid YAML ({' '.join(str(e).split())})") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    """The YAML error in one line: what, and at which line and column."""
    mark = getattr(e, "problem_mark", None)
    what = " ".join(str(getattr(e, "problem", None) or e).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark is not None else what


def _name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) is Literal:
        return " | ".join(map(str, typing.get_args(tp)))
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def type_problem(tp: Any, value: Any, where: str) -> str | None:
    """Why ``value`` is not of type ``tp`` (None: it is); lists and mappings are checked item by item."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        if any(type_problem(a, value, where) is None for a in args if a is not type(None)):
            return None
        return f"{where}: expected {' or '.join(_name(a) for a in args)}, got {_shown(value)}"
    if origin is Literal:
        return None if value in args else f"{where}: {_shown(value)} is not one of {', '.join(map(str, args))}"
    if origin is list:
        if not isinstance(value, list):
            return f"{where}: expected a list, got {_shown(value)}"
        return next((p for i, v in enumerate(value) if (p := type_problem(args[0], v, f"{where}[{i}]"))), None)
    if origin is dict:
        if not isinstance(value, dict):
            return f"{where}: expected a mapping, got {_shown(value)}"
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{where}: expected text keys, got {_shown(k)}"
            if p := type_problem(args[1], v, f"{where}.{k if k.isprintable() else repr(k)[1:-1]}"):
                return p
        return None
    if tp is bool:
        return None if isinstance(value, bool) else f"{where}: expected true or false, got {_shown(value)}"
    if tp is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else \
            f"{where}: expected an integer, got {_shown(value)}"
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{where}: expected a number, got {_shown(value)}"
        return None if math.isfinite(value) else f"{where}: expected a finite number, got {value}"
    if tp is str:
        return None if isinstance(value, str) else f"{where}: expected text, got {_shown(value)}"
    return None


def range_problem(key: str, value: Any, where: str) -> str | None:
    """Why the number(s) of field ``key`` (``Class.field``) are out of its range (None: they are in it)."""
    values = value if isinstance(value, list) else [value]
    if key.endswith(".seed"):   # any integer seeds a generator
        return None
    lo, hi, hi_in = RANGES.get(key, (0, None, True))
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if v < lo or (hi is not None and (v > hi or (v == hi and not hi_in))):
            low = "> 0" if 0 < lo < 1e-300 else f">= {lo:g}"
            span = low if hi is None else f"in [{lo:g}, {hi:g}{']' if hi_in else ')'}"
            return f"{where}: {v!r} is out of range (expected {span})"
    return None
