"""Recipes: one YAML file holds teacher, data, student, LoRA, training and evaluation settings, so
``distill``, ``train`` and ``eval`` read the same file.

Each section is a typed dataclass; unknown keys are errors that name the file and the key. CLI
overrides use dotted names, TRL-parser style: ``--train.learning_rate 1e-4`` or
``train.learning_rate=1e-4`` (values are parsed as YAML, so ``true``, ``[a, b]`` and numbers work).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .pipeline.engine import RULES, SAFE, STRICT, EngineConfig
from .pipeline.stages import ALL_STAGES
from .pipeline.templates import PROMPT_NAMES, Speakers

Backend = Literal["transformers", "openai", "labels"]
PromptStyle = Literal["fewshot", "compact"]
StageMode = Literal["score", "generate"]
Rule = Literal[RULES]                                   # safe | strict | authors (pipeline/engine.py)
LeakPolicy = Literal["error", "drop-test", "drop-train"]
SplitBy = Literal["dialogue", "reference"]
LEAK_POLICIES: tuple[str, ...] = typing.get_args(LeakPolicy)


@dataclass
class DataSource:
    """One benchmark file prepared through ``data/loaders.py`` (see ``vista-distill data prepare``)."""

    benchmark: str
    source: str
    split: str | None = None
    n: int | None = None          # sample N conversations (None = all)
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)   # loader options, e.g. {ambiguous: drop}
    hold_out: bool = True         # data.train only: False keeps the whole source for training (no test share)


@dataclass
class DataConfig:
    train: list[DataSource] = field(default_factory=list)   # material the teacher labels
    test: list[DataSource] = field(default_factory=list)    # held-out evaluation material
    test_fraction: float = 0.0    # >0: hold out this share of each train source's dialogues (plus data.test)
    seed: int = 0
    leaks: LeakPolicy = "error"   # a test dialogue also in train: error | drop-test | drop-train
    split_by: SplitBy = "dialogue"  # test_fraction's unit: dialogue | reference (dialogues sharing a reference stay
                                  # together, and a test one sharing a reference with the train side moves there)
    root: str | None = None       # data root for relative sources (else --data-root / $VISTA_DISTILL_DATA)


@dataclass
class TeacherConfig:
    backend: Backend = "transformers"
    model: str | None = None       # None: the embedded SmolLM2-135M
    base_url: str | None = None    # OpenAI-compatible server, e.g. http://localhost:8000/v1
    api_key_env: str = "OPENAI_API_KEY"
    prompt_style: PromptStyle = "fewshot"   # the teacher's prompts (the student's: pipeline.student_prompt_style)
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    temperature: float = 0.0
    fallback: str | None = None    # for backend "labels": a model for what the labels do not cover
    seed: int = 0                  # sampling seed sent to the server (self-consistency uses seed + i)
    max_new_tokens: dict[str, int] = field(default_factory=dict)   # the teacher's, over pipeline.max_new_tokens
    stage2: StageMode | None = None   # None: generate for openai, score for transformers
    stage3: StageMode | None = None   # None: generate (keeps the teacher's explanation)
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
class WorldConfig:
    """The optional world-knowledge stage (README "World knowledge"): each LACKING EVIDENCE claim is asked
    whether it is TRUE / FALSE / NOT ENOUGH KNOWLEDGE in the world, and each turn gets a three-way verdict."""

    enabled: bool = False
    knowledge: str | None = None     # a knowledge file or folder (JSONL, JSON, text) searched per claim (BM25)
    concurrent: bool = False         # also search the turn's reference and background with the claim
    top_k: int = 3                   # passages per source


@dataclass
class PipelineConfig:
    """How the VISTA pipeline runs, for every role (teacher, student, base model, baselines) and command
    (distill, train, eval, score)."""

    speakers: str = "apprentice,wizard"      # user,assistant names in prompts (the appendix's)
    max_claims: int = 16                     # claims kept per turn; those beyond are counted as dropped
    student_prompt_style: PromptStyle = "compact"   # the student's prompts (silver data, training, scoring)
    max_new_tokens: dict[str, int] = field(default_factory=dict)   # per stage / baseline prompt, over defaults
    # stages 2-3: a reference plus background longer than this (tokens, ~4 characters each) is judged in
    # chunks and the answers combined as SCALE does (pipeline/chunking.py); None: never chunked
    context_budget: int | None = None
    world: WorldConfig = field(default_factory=WorldConfig)

    def speaker_names(self) -> Speakers:
        user, _, assistant = self.speakers.partition(",")
        return Speakers(user=user, assistant=assistant or "wizard")


@dataclass
class DistillConfig:
    output_dir: str = "runs/{name}/silver"
    filter_gold_agreement: bool = True
    balance_classes: bool = False
    self_consistency_k: int = 1
    test_fraction: float = 0.1               # dialogue-level split of the exported datasets
    rule: Rule = SAFE                        # turn rule for the gold-agreement filter
    dedup: bool = True                       # drop repeated student prompts (first one kept)
    balance_max_ratio: float = 1.0           # balance_classes: cap each label at ratio x the rarest
    self_consistency_temperature: float = 0.7
    self_consistency_min_agreement: float = 0.5   # share of the k samples agreeing with the greedy label
    augment_falsified: int = 0               # >0: rule-made VERIFIED/CONTRADICTED pairs per reference (augment.py)
    augment_swapped: float = 0.0             # share of VERIFIED claims also given, UNVERIFIABLE, another dialogue's reference
    evidence_contrast: float = 0.0           # share of stage 2 claims also given a reference edited to flip them (contrast.py)
    evidence_contrast_kinds: list[str] = field(default_factory=lambda: ["deletion", "edit", "insertion", "foreign"])


@dataclass
class ServingSettings:
    """How the student and the base model are reached when ``student.servers`` lists servers."""

    base_model: str = "base"       # the base model's served name (vLLM --served-model-name; a llama.cpp alias)
    adapters: dict[str, str] = field(default_factory=lambda: {"stage1": "stage1", "stage2": "stage2",
                                                              "stage3": "stage3"})  # stage -> served adapter name
    label_scoring: Literal["auto", "echo", "top_logprobs", "generate"] = "auto"   # backends/server.py
    top_logprobs: int = 20         # logprobs asked per token by top_logprobs (vLLM's --max-logprobs caps it)
    concurrency: int = 4           # requests in flight per replica
    echo_concurrency: int = 1      # echo requests in flight, all replicas (vLLM LoRA + prompt logprobs: docs/scoring.md)
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 5           # consecutive failures of every replica before a run stops
    retry_backoff_s: float = 1.0
    retry_backoff_max_s: float = 30.0
    # cache answers under the run's output folder (calls-<role>/), keyed by served name and prompt: a rerun
    # resumes; clear it when the served adapters change under the same names
    cache: bool = False


@dataclass
class StudentConfig:
    model: str | None = None       # None: the embedded SmolLM2-135M
    dtype: str = "auto"            # auto: bf16 where the device computes it natively, else fp16 (GPU) / fp32
    load_in_4bit: bool = False
    attn_implementation: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=lambda: {"enable_thinking": False})  # training and scoring
    servers: list[str] = field(default_factory=list)   # OpenAI-compatible replicas serving base + adapters (score, eval)
    serving: ServingSettings = field(default_factory=ServingSettings)


@dataclass
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"
    layers_to_transform: list[int] | None = None   # only these decoder layers (negative: from the top); None: all


@dataclass
class TrainSettings:
    output_dir: str = "checkpoints/{name}"
    stages: list[str] = field(default_factory=lambda: ["stage1", "stage2", "stage3"])
    learning_rate: float = 2e-4
    num_train_epochs: float = 1.0
    max_steps: int = -1
    max_minutes: float | None = None         # stop a stage at the end of the step that crosses this much training time
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    gradient_checkpointing: bool = False
    bf16: bool | str = "auto"                # bf16 autocast; auto: when student.dtype resolves to bfloat16
    use_cpu: bool = False
    logging_steps: int = 10
    eval_steps: int = 50
    save_steps: int = 50
    class_balance: Literal["none", "sampler", "weights"] = "weights"           # stages 2 and 3: none | sampler | weights
    class_weight_cap: float = 10.0           # no class weighs more than this many times another
    seed: int = 0
    silver_dir: str | None = None            # silver datasets (stage1/ stage2/ stage3/); None: distill.output_dir
    sources: list[str] | None = None         # train on the silver examples of these data sources only (None: all)
    evidence_head: bool = False              # stage 2: fit the evidence head on the silver validation split (backends/evidence_head.py)
    save_total_limit: int | None = 2         # checkpoints kept for resuming
    resume: bool = True                      # continue from the last checkpoint in the stage's output dir
    cpu_threads: int | str | None = "auto"   # torch CPU threads (auto: the cores not busy; None: torch's default)
    options: dict[str, Any] = field(default_factory=dict)   # any other TRL SFTConfig field
    per_stage: dict[str, dict[str, Any]] = field(default_factory=dict)   # {stage2: {max_steps: 30}}: this section's keys for one stage


@dataclass
class EvalSettings:
    output_dir: str = "runs/{name}/eval"
    rules: list[Rule] = field(default_factory=lambda: [SAFE, STRICT])
    systems: list[str] = field(default_factory=lambda: ["student", "base", "teacher", "llm_judge", "factscore"])
    batch_size: int = 16
    bootstrap: int = 1000
    seed: int = 0
    price_per_1k_turns: dict[str, float] = field(default_factory=dict)
    mcnemar: Literal["exact", "chi2", "chi2-cc"] = "exact"                    # exact (binomial; reproduces the paper's p-values) | chi2 | chi2-cc
    match_threshold: float = 0.9             # claim matching: embedding cosine above this is a match
    match_embeddings: bool = True            # False: exact normalised-text matching only
    calibration_bins: int = 10               # stage 2 ECE and calibration curve
    price_per_1m_tokens: dict[str, dict[str, float]] = field(default_factory=dict)  # {system: {prompt, completion}}
    price_per_hour: dict[str, float] = field(default_factory=dict)  # {system: hardware price per hour}
    heldout_only: bool = False               # drop conversations the student was trained on (silver train split)
    given_claims: bool = False               # also run stages 2-3 of student and base on the human claims (claim level, paired)
    evidence: bool = True                    # with given_claims: the evidence probes (eval/evidence.py) of student and base
    threads: int | str | None = "auto"       # torch CPU threads while evaluating (auto: the cores not busy)
    max_minutes: float | None = None         # time budget: conversations in a seeded order, every system on a first
                                             # round of round_size, then on as many more as that pace fits in the budget
    round_size: int = 16


@dataclass
class Recipe:
    name: str = "recipe"
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
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

    def adapter_stages(self) -> list[str]:
        """The stages the student has an adapter for: ``train.stages``, and the world stage when the recipe
        runs it (``train --stage all`` trains these; the student system loads these)."""
        stages = list(self.train.stages)
        if self.pipeline.world.enabled and "world" not in stages:
            stages.append("world")
        return stages

    def for_stage(self, stage: str) -> Recipe:
        """This recipe with ``train.per_stage[stage]`` applied to the train section."""
        import dataclasses

        extra = self.train.per_stage.get(stage) or {}
        if not extra:
            return self
        return dataclasses.replace(self, train=dataclasses.replace(self.train, **extra, per_stage={}))

    def engine_config(self, role: Literal["teacher", "student", "base"]) -> EngineConfig:
        """The pipeline settings of one role: its prompts, how stages 2-3 answer, its token budgets
        (engine defaults, then ``pipeline.max_new_tokens``, then the teacher's own)."""
        p, t = self.pipeline, self.teacher
        budgets = {k: v for k, v in p.max_new_tokens.items() if k in ALL_STAGES}
        if role == "teacher":
            local = t.backend == "transformers" or (t.backend == "labels" and not t.base_url)
            cfg = EngineConfig(style=t.prompt_style, speakers=p.speaker_names(), max_claims=p.max_claims,
                               stage2=t.stage2 or ("score" if local else "generate"), stage3=t.stage3 or "generate")
            budgets.update(t.max_new_tokens)
        else:
            cfg = EngineConfig(style=p.student_prompt_style if role == "student" else "fewshot",
                               speakers=p.speaker_names(), max_claims=p.max_claims)
        cfg.max_new_tokens.update(budgets)
        cfg.context_budget = p.context_budget
        w = p.world
        cfg.world, cfg.world_concurrent, cfg.world_top_k = w.enabled, w.concurrent, w.top_k
        cfg.world_knowledge = self.resolve(w.knowledge) if w.knowledge else None
        return cfg


class RecipeError(ValueError):
    pass


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
        kwargs = {k: _coerce(hints[k], v, _sub(where, k)) for k, v in raw.items()}
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
    if origin is Literal:
        if value not in args:
            raise RecipeError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin is list and args and typing.get_origin(args[0]) is Literal:
        if not isinstance(value, list):
            raise RecipeError(f"{where}: expected a list, got {type(value).__name__}")
        return [_coerce(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
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
    _check_per_stage(recipe, where)
    return recipe


def _check_per_stage(recipe: Recipe, where: str) -> None:
    """``train.per_stage`` names known stages and train keys, each value of its field's type."""
    import dataclasses

    from .pipeline.stages import DISTILLED_STAGES

    for stage, extra in recipe.train.per_stage.items():
        if stage not in DISTILLED_STAGES:
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
    from .hardware import choose_threads, normalize_dtype

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
    if not (recipe.train.bf16 == "auto" or isinstance(recipe.train.bf16, bool)):
        raise RecipeError(f"{where}: train.bf16 {recipe.train.bf16!r}; expected auto, true or false")
    for section, key in (("teacher", "threads"), ("train", "cpu_threads"), ("eval", "threads")):
        value = getattr(getattr(recipe, section), key)
        try:
            if value is not None:
                choose_threads(value, 1, None)
        except ValueError:
            raise RecipeError(f"{where}: {section}.{key} {value!r}; expected auto or a positive integer") from None
