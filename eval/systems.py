"""The systems ``eval`` compares, each run over the test material by :func:`run_system`.

* ``student``: the recipe's student model with its stage adapters from ``train.output_dir`` (the world stage's too when
  the recipe runs it), the compact student prompts (``pipeline.student_prompt_style``);
* ``base``: the same model untuned, with the few-shot Appendix A.1 prompts;
* ``teacher``: the recipe's teacher through the distill call cache (``<distill.output_dir>/calls``):
  cached answers are reused, missing ones are asked live (a ``labels`` teacher answers from the
  human claims of the test material itself, so it is an upper bound rather than a competitor);
* ``llm_judge`` and ``factscore``: the baselines (:mod:`.baselines`) on the base model's backend;
* ``majority``, ``overlap`` and ``pmi``: the cheap baselines a scorer must beat (:mod:`..backends.cheap_baselines`): the
  silver training data's majority label, the word-overlap rule, the base model's claim PMI with a threshold fitted on
  the silver validation split; each turn's sentences are its claims where the human claims are not given.

A system whose prerequisites are missing (no adapters, no teacher server) is reported as skipped
with the reason. Each system's wall time, tokens and peak memory are measured separately.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Recipe
from ..data.schema import Conversation
from ..data.vocabulary import DISTILLED_STAGES, STAGES
from ..pipeline.engine import run_programs, vista_program
from ..pipeline.protocol import Backend
from ..runtime.progress import RequestBar
from ..scoring.run import records_of, run_given_claims, run_pipeline
from .baselines import BaselineConfig, baseline_programs
from .efficiency import Meter, cost_per_1k_turns
from .errors import EvalError

log = logging.getLogger(__name__)

SYSTEMS = ("student", "base", "teacher", "llm_judge", "factscore", "world_judge", "majority", "overlap", "pmi")
CHEAP_BASELINES = ("majority", "overlap", "pmi")
PIPELINE_SYSTEMS = ("student", "base", *CHEAP_BASELINES)   # run the VISTA pipeline, so the human claims can be given
# VISTA pipelines (the cheap baselines answer stage 3 too); factscore has 2 labels, the judge none
FIVE_LABEL_SYSTEMS = {"student", "base", "teacher", *CHEAP_BASELINES}
# the order systems run in: base-model systems first (one model load), then the student, then the teacher
RUN_ORDER = ("majority", "overlap", "base", "pmi", "llm_judge", "factscore", "world_judge", "student", "teacher")


class SystemSkipped(Exception):
    """A system's prerequisites are missing; the message says which."""


@dataclass
class SystemRun:
    name: str
    status: str = "ok"                    # ok | skipped | failed
    reason: str | None = None
    description: dict[str, Any] = field(default_factory=dict)
    efficiency: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    given_records: list[dict[str, Any]] = field(default_factory=list)  # stages 2-3 on the human claims
    evidence_records: list[dict[str, Any]] = field(default_factory=list)  # stage 2 probes of the evidence (evidence.py)
    given_wall_s: float = 0.0             # of which the human claims' stages 2-3 and probes (budget pacing)
    # eval.attribution: the records of each row of scoring/attribution.py (stage 1 or 3 by a rule or the humans)
    attribution_records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    attribution_wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        out = {"status": self.status, "reason": self.reason, "description": self.description,
               "efficiency": self.efficiency}
        if self.given_records:   # the whole pipeline's wall time is efficiency's; this is the claim level's
            out["claim_level_wall_s"] = round(self.given_wall_s, 3)
        if self.attribution_records:
            out["attribution_wall_s"] = round(self.attribution_wall_s, 3)
        return out


@dataclass(frozen=True)
class EvalProgress:
    """What an eval tells while it runs: ``bars``, its progress bars on stderr; ``on_system``, told about each system
    as soon as it has run (or been skipped; with ``eval.max_minutes``, once every round has)."""

    bars: bool = False
    on_system: Callable[[SystemRun], None] | None = None


def _baseline_config(recipe: Recipe) -> BaselineConfig:
    p = recipe.pipeline
    cfg = BaselineConfig(speakers=p.speaker_names(), max_claims=p.max_claims)
    cfg.max_new_tokens.update({k: v for k, v in p.max_new_tokens.items() if k in cfg.max_new_tokens})
    return cfg


class ModelLoader:
    """Loads each model eval needs once, through the backend factory: the base (for base, llm_judge, factscore and
    pmi) and the student with its adapters. Both stay loaded across the rounds of a time budget when two copies of
    the weights fit in ``memory_share`` of the device's memory; otherwise loading one lets the other go first."""

    memory_share = 0.25

    def __init__(self, recipe: Recipe, cache_root: Path | None = None) -> None:
        self.recipe = recipe
        self.cache_root = cache_root   # server answers (student.servers) are cached under it, per role
        self._base: Any = None
        self._student: Any = None
        self.load_s: dict[str, float] = {}
        self.loads: Counter[str] = Counter()

    def _build(self, role: str, adapters: dict[str, Path] | None = None) -> Any:
        """The role's backend from the one factory (served when ``student.servers``, answers cached per role)."""
        from ..backends.factory import LABEL_MEMO, backend_for

        cache = None
        if self.recipe.student.serving.cache and self.cache_root is not None:
            cache = str(self.cache_root / f"calls-{role}")
        t0 = time.perf_counter()
        backend = backend_for(self.recipe, role, adapters=adapters, cache_dir=cache, label_memo=LABEL_MEMO)
        self.loads[role] += 1
        if not self.recipe.student.servers:
            self.load_s[role] = round(self.load_s.get(role, 0.0) + time.perf_counter() - t0, 3)
        return backend

    def base(self) -> Any:
        if self._base is None:
            if not self._pair_fits(self._student):
                self._student = None
                _free_memory()
            self._base = self._build("base")
        return self._base

    def release_base(self) -> None:
        self._base = None
        _free_memory()

    def release(self) -> None:
        """Both models go (the end of an evaluation)."""
        self._base = self._student = None
        _free_memory()

    def _pair_fits(self, loaded: Any) -> bool:
        """Whether ``loaded`` (a backend, or None) and a second copy of its weights fit in ``memory_share`` of the
        memory of the device it computes on; served models take none here."""
        model = getattr(loaded, "model", None)
        if model is None:
            return True
        from ..runtime.hardware import device_memory_bytes

        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        return 2 * weights <= device_memory_bytes(next(model.parameters()).device) * self.memory_share

    def both_fit(self) -> bool:
        """Whether the loaded base leaves room for the student (or a local teacher) beside it."""
        return self._pair_fits(self._base)

    def adapters_dir(self) -> Path:
        return Path(self.recipe.resolve(self.recipe.train.output_dir))

    def student(self) -> Any:
        if self.recipe.student.servers:   # the adapters are on the servers (vista-distill serve-config)
            return self._build("student")
        if self._student is not None:
            return self._student
        root = self.adapters_dir()
        # the world stage's adapter too when the recipe runs that stage (else it would answer on the bare model)
        want = [s for s in self.recipe.adapter_stages() if s in DISTILLED_STAGES] or list(STAGES)
        missing = [s for s in want if not (root / s / "adapter_config.json").exists()]
        if missing:
            raise SystemSkipped(
                f"no trained adapter for {', '.join(missing)} under {root} (expected "
                f"{', '.join(str(root / s / 'adapter_config.json') for s in missing)}); train them with "
                f"`vista-distill train --config {self.recipe.path or 'RECIPE'}`")
        if not self.both_fit():
            self.release_base()
        self._student = self._build("student", {st: root / st for st in want})
        return self._student


def _baseline_backend(name: str, recipe: Recipe, backends: ModelLoader) -> Any:
    """The cheap baseline ``name`` as a backend; skipped (with the reason) where it has nothing to stand on."""
    from ..backends.cheap_baselines import BaselineBackend, majority_labels
    from ..data.silver import SilverDataError
    from ..train.silver_data import silver_root

    if name == "overlap":
        return BaselineBackend("overlap")
    if name == "majority":
        try:
            return BaselineBackend("majority", majority=majority_labels(silver_root(recipe)))
        except (SilverDataError, ValueError) as e:
            raise SystemSkipped(f"no majority label: {e}") from e
    if recipe.student.servers:
        raise SystemSkipped("pmi needs the base model in process (claim log-probabilities); student.servers is set")
    from ..train.evidence_fit import load_pmi_head
    from ..train.silver_data import TrainError

    try:
        head = load_pmi_head(recipe)
    except (SilverDataError, TrainError, ValueError) as e:
        raise SystemSkipped(f"no PMI threshold: {e}") from e
    return BaselineBackend("pmi", model=backends.base(), head=head)


def _free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _describe(backend: Backend, style: str) -> dict[str, Any]:
    """A system's description: what its backend is, where an in-process model computes, its prompt style."""
    hw = {"hardware": backend.hardware.to_dict()} if backend.hardware is not None else {}
    return {**backend.describe(), **hw, "prompts": style}


def run_system(name: str, recipe: Recipe, conversations: list[Conversation], backends: ModelLoader,
               out_dir: Path, progress: bool = False, given: list[Conversation] | None = None,
               reference_probes: set[str] | None = None) -> SystemRun:
    """Run one system over ``conversations``; prerequisites missing -> status ``skipped`` with the reason.

    ``given``: the conversations whose human claims go through stages 2-3 and the evidence probes
    (``eval.given_claims``; default ``conversations``): a time budget runs the claim level on more of them
    than the whole pipeline. ``reference_probes``: the conversations whose claims get the whole-reference probes
    (``eval.evidence_conversations``; None: all)."""
    given = conversations if given is None else given
    run = SystemRun(name)
    try:
        backend, cfg, programs, run.description = _start_system(name, recipe, conversations, backends, out_dir)
    except SystemSkipped as e:
        run.status, run.reason = "skipped", str(e)
        return run
    except EvalError:
        raise
    except Exception as e:   # a teacher server that is down, a broken adapter: report, go on
        log.exception("system %s could not start", name)
        run.status, run.reason = "failed", f"{type(e).__name__}: {e}"
        return run
    pipeline = name in PIPELINE_SYSTEMS   # the path VistaScorer.score takes (.scoring); others: programs
    attribute = pipeline and recipe.eval.given_claims and name in recipe.eval.attribution and bool(conversations)
    if attribute:   # the attribution's rows reuse this run's answers (stage 1 above all); this run computes its own
        from ..backends.stage_routing import RequestMemo

        backend = RequestMemo(backend, serve=False)
    bar = RequestBar(f"eval {name}", backend, enabled=progress and bool(conversations if pipeline else programs),
                     mininterval=1.0)
    on_issue = bar.on_issue if progress else None
    try:
        with Meter(backend) as meter:
            if pipeline:
                run.records = run_pipeline(conversations, cfg, backend, on_issue=on_issue)[0]
            else:
                run.records = records_of(run_programs(programs, backend, batched=True, on_issue=on_issue)) \
                    if programs else []
    except Exception as e:
        log.exception("system %s failed", name)
        run.status, run.reason = "failed", f"{type(e).__name__}: {e}"
        return run
    finally:
        bar.close()
    run.efficiency = meter.report(sum(len(c.scored_turns) for c in conversations))
    if backend.served:   # which label-scoring method ran, replicas set aside and back
        run.description.update({k: v for k, v in backend.describe().items() if k in ("label_method", "replica_events")})
        run.description["label_methods"] = dict(backend.stats.get("label_methods") or {})
    if recipe.eval.given_claims and pipeline and given:
        _run_given_claims(run, given, cfg, backend, recipe.eval.seed if recipe.eval.evidence else None, progress,
                          reference_probes)
    if attribute:
        _run_attribution(run, conversations, cfg, backend, progress)
    if name == "llm_judge":   # how the judge's answers were read (json / field / bare / yes/no / unread)
        how = Counter(str((r.get("judge") or {}).get("parsed_from")) for r in run.records if r["scored"])
        run.description["judge_parsed_from"] = {k.replace("None", "unread"): v for k, v in sorted(how.items())}
    run.efficiency["cost_per_1k_turns"] = cost_per_1k_turns(recipe, name, run.efficiency)
    return run


def _start_system(name: str, recipe: Recipe, conversations: list[Conversation], backends: ModelLoader,
                  out_dir: Path) -> tuple[Backend, Any, list | None, dict[str, Any]]:
    """A system's backend, its engine settings (pipeline systems) or programs (the others), and its description."""
    cfg = programs = None
    if name in ("base", "llm_judge", "factscore", "world_judge"):
        backend = backends.base()
        if name == "base":
            cfg = recipe.engine_config("base")
            description = {**_describe(backend, "fewshot"), "stage2": cfg.stage2, "stage3": cfg.stage3}
        else:
            programs = baseline_programs(name, conversations, _baseline_config(recipe))
            description = {**_describe(backend, "fewshot"), "baseline": name}
        description["load_s"] = backends.load_s.get("base")
    elif name == "student":
        backend = backends.student()
        cfg = recipe.engine_config("student")
        description = {**_describe(backend, cfg.style), "stage2": cfg.stage2, "stage3": cfg.stage3,
                       "load_s": backends.load_s.get("student")}
        if recipe.eval.calibration:
            from ..backends.calibration import Calibration, apply_calibration

            cal = Calibration.load(backends.adapters_dir(), recipe.eval.calibration)
            backend = apply_calibration(backend, cal)
            description["calibration"] = {"name": cal.name, "rules": cal.rules, "dev": cal.fitted.get("dev")}
    elif name in CHEAP_BASELINES:
        backend = _baseline_backend(name, recipe, backends)
        cfg = dataclasses.replace(recipe.engine_config("student"), stage2="score", stage3="score", world=False)
        description = {**_describe(backend, cfg.style), "stage2": cfg.stage2, "stage3": cfg.stage3}
    elif name == "teacher":
        backend, programs, description = _teacher(recipe, conversations, out_dir)
    else:
        raise EvalError(f"eval.systems: unknown system {name!r}; valid: {', '.join(SYSTEMS)}")
    return backend, cfg, programs, description


def _run_given_claims(run: SystemRun, given: list[Conversation], cfg: Any, backend: Backend,
                      evidence_seed: int | None, progress: bool, reference_probes: set[str] | None = None) -> None:
    """Stages 2-3 on the human claims of ``given`` (and the evidence probes, with ``evidence_seed``) into ``run``."""
    t0 = time.perf_counter()
    has_claims = any(c.turns[i].gold_claims for c in given for i in c.scored_turns)
    bar = RequestBar(f"eval {run.name}, human claims given", backend, enabled=progress and has_claims,
                     mininterval=1.0)
    try:
        run.given_records, run.evidence_records = run_given_claims(
            given, cfg, backend, evidence_seed=evidence_seed, on_issue=bar.on_issue if progress else None,
            reference_probes=reference_probes)
    finally:
        bar.close()
    run.given_wall_s = time.perf_counter() - t0


def _run_attribution(run: SystemRun, conversations: list[Conversation], cfg: Any, backend: Backend,
                     progress: bool) -> None:
    """The attribution's rows (scoring/attribution.py) over ``conversations`` into ``run``."""
    from ..scoring.attribution import attributed, attribution_records

    t0 = time.perf_counter()
    backend.serve = True
    bar = RequestBar(f"eval {run.name}, stage by stage", backend,
                     enabled=progress and bool(attributed(conversations)), mininterval=1.0)
    try:
        run.attribution_records = attribution_records(conversations, cfg, backend, run.records,
                                                      on_issue=bar.on_issue if progress else None)
    finally:
        bar.close()
    run.attribution_wall_s = time.perf_counter() - t0


def merge_runs(a: SystemRun, b: SystemRun, recipe: Recipe) -> SystemRun:
    """One system's runs over two rounds of conversations as one run (``eval.max_minutes``): records joined,
    times and token counts added, memory peaks the larger; a round that failed or was skipped ends the system."""
    if b.status != "ok":
        return b
    ea, eb = a.efficiency, b.efficiency
    wall, turns = (ea.get("wall_s") or 0) + (eb.get("wall_s") or 0), ea["scored_turns"] + eb["scored_turns"]

    def add(x: float | None, y: float | None) -> float | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    stats = {k: round(add(ea["backend_stats"].get(k), eb["backend_stats"].get(k)), 3)
             for k in {**ea["backend_stats"], **eb["backend_stats"]}}
    peaks = [
        v for v in (ea.get("cuda_max_memory_allocated_mb"), eb.get("cuda_max_memory_allocated_mb")) if v is not None
    ]
    eff = {
        **ea,
        "wall_s": round(wall, 3),
        "scored_turns": turns,
        "turns_per_s": round(turns / wall, 4) if wall else None,
        "prompt_tokens": add(ea.get("prompt_tokens"), eb.get("prompt_tokens")),
        "completion_tokens": add(ea.get("completion_tokens"), eb.get("completion_tokens")),
        "backend_stats": stats,
        "peak_rss_mb": max(ea["peak_rss_mb"], eb["peak_rss_mb"]),
        "cuda_max_memory_allocated_mb": max(peaks) if peaks else None,
        "rounds": ea.get("rounds", 1) + 1,
    }
    hits, calls = stats.get("hits"), stats.get("calls")
    eff["cache_hit_share"] = (
        round(hits / (hits + calls), 4) if hits is not None and calls is not None and hits + calls else None
    )
    eff["cost_per_1k_turns"] = cost_per_1k_turns(recipe, a.name, eff)
    desc = dict(a.description)
    if "label_methods" in b.description:
        desc["label_methods"] = dict(Counter(a.description.get("label_methods") or {})
                                     + Counter(b.description["label_methods"]))
    rows = {k: a.attribution_records.get(k, []) + b.attribution_records.get(k, [])
            for k in {**a.attribution_records, **b.attribution_records}}
    return SystemRun(a.name, "ok", None, desc, eff, a.records + b.records, a.given_records + b.given_records,
                     a.evidence_records + b.evidence_records, a.given_wall_s + b.given_wall_s, rows,
                     a.attribution_wall_s + b.attribution_wall_s)


class _TeacherChain:
    """The teacher's backend chain; its stats and progress are the innermost backend's (the one that
    makes the calls)."""

    def __init__(self, teacher: Any) -> None:
        self.teacher = teacher
        self.name = teacher.name

    @property
    def served(self) -> bool:
        return self.teacher.backend.served

    @property
    def hardware(self) -> Any:
        return self.teacher.backend.hardware

    def describe(self) -> dict[str, Any]:
        return self.teacher.backend.describe()

    @property
    def stats(self) -> dict[str, Any]:
        return self.teacher.core.stats

    @property
    def progress(self) -> Callable[[int], None] | None:
        return self.teacher.core.progress

    @progress.setter
    def progress(self, fn: Callable[[int], None] | None) -> None:
        self.teacher.core.progress = fn

    def run(self, requests: list) -> list:
        return self.teacher.backend.run(requests)


def _teacher(recipe: Recipe, conversations: list[Conversation], out_dir: Path) -> tuple[Any, list, dict[str, Any]]:
    from ..backends.cache import CallCache
    from ..backends.teacher import build_teacher

    distill_dir = Path(recipe.resolve(recipe.distill.output_dir))
    calls = distill_dir / "calls"
    cache_dir = calls if calls.is_dir() else out_dir / "teacher_calls"
    cache = CallCache(cache_dir)
    before = len(cache)
    teacher = build_teacher(recipe, conversations, cache)
    cfg = recipe.engine_config("teacher")
    programs = [vista_program(c, cfg) for c in conversations]
    desc = {**teacher.description, "call_cache": str(cache_dir), "cache_entries_before": before,
            "prompts": cfg.style, "stage2": cfg.stage2, "stage3": cfg.stage3}
    if recipe.teacher.backend == "labels":
        desc["note"] = ("labels teacher: stages 1-3 are answered from the human claim labels of the test "
                        "material itself, so its claim scores are an upper bound, not an independent system")
    return _TeacherChain(teacher), programs, desc
