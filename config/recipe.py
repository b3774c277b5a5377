"""The recipe object: one typed dataclass per YAML section (teacher, pipeline, data, distill, student, LoRA,
training, evaluation) under :class:`Recipe`, which every command reads."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from ..backends.openai_compat import OpenAISettings
from ..backends.server import ServingSettings
from ..data.vocabulary import ALL_STAGES
from ..pipeline.engine import RULES, SAFE, STRICT, EngineConfig
from ..pipeline.templates import Speakers

Backend = Literal["transformers", "openai", "labels"]
PromptStyle = Literal["fewshot", "compact"]
StageMode = Literal["score", "generate"]
Rule = Literal[RULES]                                   # safe | strict | authors (pipeline/engine.py)
LeakPolicy = Literal["error", "drop-test", "drop-train"]
SplitBy = Literal["dialogue", "reference"]
LEAK_POLICIES: tuple[str, ...] = typing.get_args(LeakPolicy)


@dataclass
class DataSource:
    """One benchmark file prepared through ``data/benchmarks/`` (see ``vista-distill data prepare``)."""

    benchmark: str                # a registered benchmark (vista-distill data stats lists them) or "file"
    source: str                   # its file or folder, relative to data.root
    split: str | None = None      # the benchmark's split, where its loader has several
    n: int | None = None          # sample N conversations (None = all)
    seed: int = 0                 # seed of that sample
    options: dict[str, Any] = field(default_factory=dict)   # loader options, e.g. {ambiguous: drop}
    hold_out: bool = True         # data.train only: False keeps the whole source for training (no test share)


@dataclass
class DataConfig:
    train: list[DataSource] = field(default_factory=list)   # material the teacher labels
    test: list[DataSource] = field(default_factory=list)    # held-out evaluation material
    test_fraction: float = 0.0    # >0: hold out this share of each train source's dialogues (plus data.test)
    seed: int = 0                 # seed of the test_fraction split
    leaks: LeakPolicy = "error"   # a test dialogue also in train: error | drop-test | drop-train
    split_by: SplitBy = "dialogue"  # test_fraction's unit: dialogue | reference (dialogues sharing a reference stay
                                  # together, and a test one sharing a reference with the train side moves there)
    root: str | None = None       # data root for relative sources (else --data-root / $VISTA_DISTILL_DATA)


@dataclass
class TeacherConfig(OpenAISettings):
    """The model, or the human labels, that labels the train material. A teacher on a server (backend openai, or a
    labels fallback on base_url) is called with this section: it is the OpenAI-compatible backend's settings
    (OpenAISettings in backends/openai_compat.py, the keys from api_key_env on)."""

    backend: Backend = "transformers"   # a local model (transformers), a server (openai) or human labels (labels)
    model: str | None = None       # None: the embedded SmolLM2-135M
    base_url: str | None = None    # OpenAI-compatible server, e.g. http://localhost:8000/v1
    prompt_style: PromptStyle = "fewshot"   # the teacher's prompts (the student's: pipeline.student_prompt_style)
    fallback: str | None = None    # for backend "labels": a model for what the labels do not cover
    max_new_tokens: dict[str, int] = field(default_factory=dict)   # the teacher's, over pipeline.max_new_tokens
    stage2: StageMode | None = None   # None: generate for openai, score for transformers
    stage3: StageMode | None = None   # None: generate (keeps the teacher's explanation)
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

    enabled: bool = False            # run the world stage after stage 3
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
    world: WorldConfig = field(default_factory=WorldConfig)   # the optional world-knowledge stage
    stage1_fallback: bool = True             # a stage 1 answer with no usable claim: the sentence splitter's claims
                                             # (the record says so); False: the turn is unknown

    def speaker_names(self) -> Speakers:
        user, _, assistant = self.speakers.partition(",")
        return Speakers(user=user, assistant=assistant or "wizard")


@dataclass
class DistillConfig:
    output_dir: str = "runs/{name}/silver"   # the silver datasets, the teacher's call cache and records
    filter_gold_agreement: bool = True       # drop a turn's calls when its verdict disagrees with the gold turn label
    balance_classes: bool = False            # stages 2-3, train split: cap each label's share (balance_max_ratio)
    self_consistency_k: int = 1              # >1: sample the teacher k times and keep labels enough samples agree on
    validation_fraction: float = 0.1         # dialogue-level validation split of the exported datasets (choices)
    rule: Rule = SAFE                        # turn rule for the gold-agreement filter
    dedup: bool = True                       # drop repeated student prompts (first one kept)
    balance_max_ratio: float = 1.0           # balance_classes: cap each label at ratio x the rarest
    self_consistency_temperature: float = 0.7   # temperature of the k samples
    self_consistency_min_agreement: float = 0.5   # share of the k samples agreeing with the greedy label
    augment_falsified: int = 0               # >0: rule-made VERIFIED/CONTRADICTED pairs per reference (augment.py)
    augment_swapped: float = 0.0             # share of VERIFIED claims also given, UNVERIFIABLE, another dialogue's
                                             # reference
    evidence_contrast: float = 0.0           # share of stage 2 claims also given a reference edited to flip them
                                             # (contrast.py)
    # the reference edits evidence_contrast makes (distill/contrast.py)
    evidence_contrast_kinds: list[str] = field(default_factory=lambda: ["deletion", "edit", "insertion", "foreign"])


@dataclass
class StudentConfig:
    model: str | None = None       # None: the embedded SmolLM2-135M
    dtype: str = "auto"            # auto: bf16 where the device computes it natively (a CPU: and faster), else fp16
                                   # (GPU) / fp32
    load_in_4bit: bool = False     # NF4 weights through bitsandbytes (QLoRA training, 4-bit scoring)
    attn_implementation: str | None = None   # transformers' attn_implementation (None: its default)
    # in-process scoring: each stage's LoRA merged into its own copy of the weights it adapts (no PEFT wrapper in the
    # forward); auto: in float32 only, where it is exact up to float rounding (bf16 rounding moves a small student)
    merge_adapters: bool | str = "auto"
    chat_template_kwargs: dict[str, Any] = field(default_factory=lambda: {"enable_thinking": False})  # training and
                                                                                                      # scoring
    servers: list[str] = field(default_factory=list)   # OpenAI-compatible replicas serving base + adapters (score,
                                                       # eval)
    serving: ServingSettings = field(default_factory=ServingSettings)   # how those servers are called


@dataclass
class LoraSettings:
    r: int = 16                    # LoRA rank
    alpha: int = 32                # LoRA alpha (the update is scaled by alpha / r)
    dropout: float = 0.0           # LoRA dropout
    target_modules: str | list[str] = "all-linear"   # PEFT target_modules: "all-linear" or module names
    layers_to_transform: list[int] | None = None   # only these decoder layers (negative: from the top); None: all


@dataclass
class TrainSettings:
    output_dir: str = "checkpoints/{name}"   # one adapter folder per stage (stage1/ stage2/ stage3/)
    stages: list[str] = field(default_factory=lambda: ["stage1", "stage2", "stage3"])   # stages with an adapter
    learning_rate: float = 2e-4              # peak learning rate of the LoRA weights
    num_train_epochs: float = 1.0            # passes over the stage's silver train split
    max_steps: int = -1                      # >0: stop after this many optimizer steps (over num_train_epochs)
    max_minutes: float | None = None         # stop a stage at the end of the step that crosses this much training time
    per_device_train_batch_size: int = 4     # examples per device and forward pass
    gradient_accumulation_steps: int = 1     # device batches per optimizer step
    # run each device batch as length-sorted micro-batches of this many examples (gradient accumulation): the same
    # examples and loss per optimizer step, less padding (train/trainer.py LengthSortedSteps); None: one batch
    micro_batch_size: int | None = None
    max_length: int = 1024                   # tokens of prompt and completion; longer examples are dropped
    gradient_checkpointing: bool = False     # recompute activations in the backward (less memory, more time)
    bf16: bool | str = "auto"                # bf16 autocast; auto: when student.dtype resolves to bfloat16
    use_cpu: bool = False                    # train on the CPU even where a GPU is present
    logging_steps: int = 10                  # optimizer steps between logged losses
    eval_steps: int = 50                     # steps between validation losses (0: none)
    save_steps: int = 50                     # steps between checkpoints (resume points)
    class_balance: Literal["none", "sampler", "weights"] = "weights"           # stages 2 and 3: none | sampler |
                                                                               # weights
    class_weight_cap: float = 10.0           # no class weighs more than this many times another
    seed: int = 0                            # seed of initialisation, shuffling and sampling
    silver_dir: str | None = None            # silver datasets (stage1/ stage2/ stage3/); None: distill.output_dir
    sources: list[str] | None = None         # train on the silver examples of these data sources only (None: all)
    evidence_head: bool = False              # stage 2: fit the evidence head on the silver validation split
                                             # (backends/evidence_head.py)
    save_total_limit: int | None = 2         # checkpoints kept for resuming
    resume: bool = True                      # continue from the last checkpoint in the stage's output dir
    cpu_threads: int | str | None = "auto"   # torch CPU threads (auto: the cores not busy; None: torch's default)
    options: dict[str, Any] = field(default_factory=dict)   # any other TRL SFTConfig field
    per_stage: dict[str, dict[str, Any]] = field(default_factory=dict)   # {stage2: {max_steps: 30}}: this section's
                                                                         # keys for one stage


@dataclass
class EvalSettings:
    output_dir: str = "runs/{name}/eval"     # results.json, report.md, report.html, plots, records, journal
    rules: list[Rule] = field(default_factory=lambda: [SAFE, STRICT])   # turn rules reported (pipeline/engine.py)
    # the systems compared (docs/evaluate.md)
    systems: list[str] = field(default_factory=lambda: ["student", "base", "teacher", "llm_judge", "factscore", "pmi",
                                                        "overlap", "majority"])
    batch_size: int = 16                     # requests per forward pass of the in-process models
    bootstrap: int = 1000                    # bootstrap resamples of the confidence intervals
    seed: int = 0                            # seed of the bootstrap and of the conversation order
    price_per_1k_turns: dict[str, float] = field(default_factory=dict)   # {system: USD per 1,000 scored turns}
    mcnemar: Literal["exact", "chi2", "chi2-cc"] = "exact"                    # exact (binomial; reproduces the paper's
                                                                              # p-values) | chi2 | chi2-cc
    match_threshold: float = 0.9             # claim matching: embedding cosine above this is a match
    match_embeddings: bool = True            # False: exact normalised-text matching only
    calibration_bins: int = 10               # stage 2 ECE and calibration curve
    price_per_1m_tokens: dict[str, dict[str, float]] = field(default_factory=dict)  # {system: {prompt, completion}}
    price_per_hour: dict[str, float] = field(default_factory=dict)  # {system: hardware price per hour}
    heldout_only: bool = False               # drop conversations the student was trained on (silver train split)
    given_claims: bool = False               # also run stages 2-3 of student and base on the human claims (claim level,
                                             # paired)
    claim_level_only: list[str] = field(default_factory=list)   # systems that run the claim level only (no stage 1)
                                             # while given_claims is on; without it they run the whole pipeline
    evidence: bool = True                    # with given_claims: the evidence probes (scoring/evidence.py) of student
                                             # and base
    evidence_conversations: int | None = None   # the whole-reference probes (deletion, foreign, edit) on N
                                             # conversations spread evenly over the eval order (claim_only on all);
                                             # None: all
    threads: int | str | None = "auto"       # torch CPU threads while evaluating (auto: the cores not busy)
    max_minutes: float | None = None         # time budget: conversations in a seeded order, every system on a first
                                             # round of round_size, then on as many more as that pace fits in the budget
    round_size: int = 16                     # conversations in the first round of a time-budgeted eval
    # with given_claims: these systems' turn accuracy with stage 1 or 3 answered by its rule or by the humans
    # (scoring/attribution.py), on the test turns that carry human claims and gold labels
    attribution: list[str] = field(default_factory=lambda: ["student"])
    calibration: str | None = None           # the student scores with the calibration NAME kept beside its adapters
                                             # (vista-distill calibrate); None: what training fitted
    tune_on: list[DataSource] = field(default_factory=list)   # a labelled dev split of the test's benchmark: stage 2
                                             # thresholds of student, pmi and overlap tuned there, reported beside
                                             # fixed;
                                             # run first, inside max_minutes


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
        cfg.stage1_fallback = p.stage1_fallback
        w = p.world
        cfg.world, cfg.world_concurrent, cfg.world_top_k = w.enabled, w.concurrent, w.top_k
        cfg.world_knowledge = self.resolve(w.knowledge) if w.knowledge else None
        return cfg


class RecipeError(ValueError):
    """A recipe that cannot run: each problem names the file and the key (``problems``: all of them, one a line)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [message])
        super().__init__(message if len(self.problems) == 1 else "\n".join(self.problems))

    def lines(self) -> list[str]:
        return self.problems
