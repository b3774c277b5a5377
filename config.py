"""Recipes: one YAML file holds teacher, data, student, LoRA, training and evaluation settings, so
``distill``, ``train`` and ``eval`` read the same file.

Each section is a typed dataclass; unknown keys are errors that name the file and the key. CLI
overrides use dotted names, TRL-parser style: ``--train.learning_rate 1e-4`` or
``train.learning_rate=1e-4`` (values are parsed as YAML, so ``true``, ``[a, b]`` and numbers work).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass
class DataSource:
    """One benchmark file prepared through ``data/loaders.py`` (see ``vista-distill data prepare``)."""

    benchmark: str
    source: str
    split: str | None = None
    n: int | None = None          # sample N conversations (None = all)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)   # loader options, e.g. {ambiguous: drop}


@dataclass
class DataConfig:
    train: list[DataSource] = field(default_factory=list)   # material the teacher labels
    test: list[DataSource] = field(default_factory=list)    # held-out evaluation material
    test_fraction: float = 0.0    # >0: hold out this share of each train source's dialogues (plus data.test)
    seed: int = 0
    leaks: str = "error"          # a test dialogue also in train: error | drop-test | drop-train
    root: str | None = None       # data root for relative sources (else --data-root / $VISTA_DISTILL_DATA)


@dataclass
class TeacherConfig:
    backend: str = "transformers"  # transformers | openai | labels
    model: str | None = None       # None: the embedded SmolLM2-135M
    base_url: str | None = None    # OpenAI-compatible server, e.g. http://localhost:8000/v1
    api_key_env: str = "OPENAI_API_KEY"
    prompt_style: str = "fewshot"
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    temperature: float = 0.0
    fallback: str | None = None    # for backend "labels": a model for what the labels do not cover
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0                  # sampling seed sent to the server (self-consistency uses seed + i)
    max_new_tokens: dict[str, int] = field(default_factory=dict)   # per stage, over the engine defaults
    stage2: str | None = None      # score | generate; None: generate for openai, score for transformers
    stage3: str | None = None      # None: generate (keeps the teacher's explanation)
    extra_body: dict[str, Any] = field(default_factory=dict)       # more request fields (e.g. top_p)
    retry_backoff_s: float = 1.0   # first wait before a retry; doubles up to retry_backoff_max_s
    retry_backoff_max_s: float = 30.0
    dtype: str = "auto"            # backend "transformers": auto | bfloat16 | float16 | float32 (hardware.py)
    batch_size: int = 16           # backend "transformers"
    threads: int | str = "auto"    # backend "transformers": torch CPU threads (auto: the cores not busy)
    # chat-template variables: rendered locally, and sent to OpenAI-compatible servers as
    # chat_template_kwargs (vLLM, SGLang); thinking off by default. Hosted APIs that reject it: {}.
    chat_template_kwargs: dict[str, Any] = field(default_factory=lambda: {"enable_thinking": False})


@dataclass
class DistillConfig:
    output_dir: str = "runs/{name}/silver"
    student_prompt_style: str = "compact"   # prompt written into the exported datasets
    filter_gold_agreement: bool = True
    balance_classes: bool = False
    self_consistency_k: int = 1
    test_fraction: float = 0.1               # dialogue-level split of the exported datasets
    options: dict[str, Any] = field(default_factory=dict)
    rule: str = "safe"                       # turn rule for the gold-agreement filter: safe | strict | authors
    speakers: str = "apprentice,wizard"      # user,assistant names in teacher and student prompts
    dedup: bool = True                       # drop repeated student prompts (first one kept)
    balance_max_ratio: float = 1.0           # balance_classes: cap each label at ratio x the rarest
    self_consistency_temperature: float = 0.7
    self_consistency_min_agreement: float = 0.5   # share of the k samples agreeing with the greedy label
    max_claims: int = 16


@dataclass
class StudentConfig:
    model: str | None = None       # None: the embedded SmolLM2-135M
    dtype: str = "auto"            # auto: bf16 where the device computes it natively, else fp16 (GPU) / fp32
    load_in_4bit: bool = False
    attn_implementation: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=lambda: {"enable_thinking": False})  # training and scoring


@dataclass
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"


@dataclass
class TrainSettings:
    output_dir: str = "checkpoints/{name}"
    stages: list[str] = field(default_factory=lambda: ["stage1", "stage2", "stage3"])
    learning_rate: float = 2e-4
    num_train_epochs: float = 1.0
    max_steps: int = -1
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    gradient_checkpointing: bool = False
    bf16: bool | str = "auto"                # bf16 autocast; auto: when student.dtype resolves to bfloat16
    use_cpu: bool = False
    logging_steps: int = 10
    eval_steps: int = 50
    save_steps: int = 50
    class_balance: str = "weights"           # stages 2 and 3: none | sampler | weights
    class_weight_cap: float = 10.0           # no class weighs more than this many times another
    seed: int = 0
    silver_dir: str | None = None            # silver datasets (stage1/ stage2/ stage3/); None: distill.output_dir
    save_total_limit: int | None = 2         # checkpoints kept for resuming
    resume: bool = True                      # continue from the last checkpoint in the stage's output dir
    cpu_threads: int | str | None = "auto"   # torch CPU threads (auto: the cores not busy; None: torch's default)
    options: dict[str, Any] = field(default_factory=dict)   # any other TRL SFTConfig field


@dataclass
class EvalSettings:
    output_dir: str = "runs/{name}/eval"
    rules: list[str] = field(default_factory=lambda: ["safe", "strict"])
    systems: list[str] = field(default_factory=lambda: ["student", "base", "teacher", "llm_judge", "factscore"])
    batch_size: int = 16
    bootstrap: int = 1000
    seed: int = 0
    price_per_1k_turns: dict[str, float] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    mcnemar: str = "exact"                   # exact (binomial; reproduces the paper's p-values) | chi2 | chi2-cc
    match_threshold: float = 0.9             # claim matching: embedding cosine above this is a match
    match_embeddings: bool = True            # False: exact normalised-text matching only
    calibration_bins: int = 10               # stage 2 ECE and calibration curve
    max_new_tokens: dict[str, int] = field(default_factory=dict)   # per stage / baseline prompt, over defaults
    price_per_1m_tokens: dict[str, dict[str, float]] = field(default_factory=dict)  # {system: {prompt, completion}}
    price_per_hour: dict[str, float] = field(default_factory=dict)  # {system: hardware price per hour}
    heldout_only: bool = False               # drop conversations the student was trained on (silver train split)
    threads: int | str | None = "auto"       # torch CPU threads while evaluating (auto: the cores not busy)


@dataclass
class Recipe:
    name: str = "recipe"
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    data: DataConfig = field(default_factory=DataConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    student: StudentConfig = field(default_factory=StudentConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    path: str | None = None       # where it was loaded from (not a YAML key)

    def resolve(self, template: str) -> str:
        """Fill ``{name}`` in a path template."""
        return template.format(name=self.name)


class RecipeError(ValueError):
    pass


LEAK_POLICIES = ("error", "drop-test", "drop-train")


def _build(cls: type, raw: Any, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    if dataclasses.is_dataclass(cls):
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise RecipeError(f"{where}: expected a mapping for {cls.__name__}, got {type(raw).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.name != "path"}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise RecipeError(f"{where}: unknown key(s) {unknown}; valid: {sorted(names)}")
        kwargs = {k: _coerce(hints[k], v, f"{where}.{k}") for k, v in raw.items()}
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise RecipeError(f"{where}: {e}") from e
    return raw


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, list):
            raise RecipeError(f"{where}: expected a list, got {type(value).__name__}")
        return [_build(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError as e:
            raise RecipeError(f"{where}: expected a number, got {value!r}") from e
    if tp is int and isinstance(value, str):
        try:
            return int(value)
        except ValueError as e:
            raise RecipeError(f"{where}: expected an integer, got {value!r}") from e
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
        node[leaf] = yaml.safe_load(value)
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
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise RecipeError(f"{path}: not valid YAML ({e})") from e
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
    return recipe


def _check_hardware_fields(recipe: Recipe, where: str) -> None:
    """Precision and thread settings are checked when the recipe is read, not when a model loads."""
    from .hardware import choose_threads, normalize_dtype

    for section, key in (("teacher", "dtype"), ("student", "dtype")):
        try:
            normalize_dtype(getattr(getattr(recipe, section), key), f"{where}: {section}.{key}")
        except ValueError as e:
            raise RecipeError(str(e)) from None
    if recipe.data.leaks not in LEAK_POLICIES:
        raise RecipeError(f"{where}: data.leaks {recipe.data.leaks!r}; expected one of {', '.join(LEAK_POLICIES)}")
    if not (recipe.train.bf16 == "auto" or isinstance(recipe.train.bf16, bool)):
        raise RecipeError(f"{where}: train.bf16 {recipe.train.bf16!r}; expected auto, true or false")
    for section, key in (("teacher", "threads"), ("train", "cpu_threads"), ("eval", "threads")):
        value = getattr(getattr(recipe, section), key)
        try:
            if value is not None:
                choose_threads(value, 1, None)
        except ValueError:
            raise RecipeError(f"{where}: {section}.{key} {value!r}; expected auto or a positive integer") from None
