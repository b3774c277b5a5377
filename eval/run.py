"""``run_eval``: a recipe and test material in, a run folder out (the engine behind ``vista-distill eval``).

Systems (``eval.systems``, in that order in the report):

* ``student``: the recipe's student model with the three stage adapters from ``train.output_dir``,
  the compact student prompts (``distill.student_prompt_style``);
* ``base``: the same model untuned, with the few-shot Appendix A.1 prompts;
* ``teacher``: the recipe's teacher through the distill call cache (``<distill.output_dir>/calls``):
  cached answers are reused, missing ones are asked live (a ``labels`` teacher answers from the
  human claims of the test material itself, so it is an upper bound rather than a competitor);
* ``llm_judge`` and ``factscore``: the baselines (:mod:`.baselines`) on the base model's backend.

A system whose prerequisites are missing (no adapters, no teacher server) is reported as skipped
with the reason. Each system's wall time, tokens and peak memory are measured separately.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import DataSource, Recipe
from ..data.io import atomic_write_text
from ..data.schema import Conversation
from ..pipeline.engine import RULES, EngineConfig, run_programs, vista_program
from ..pipeline.prompts import Speakers
from . import metrics as M
from .baselines import BaselineConfig, baseline_programs
from .significance import MCNEMAR_VARIANTS, bootstrap_accuracy, paired_mcnemar

log = logging.getLogger(__name__)

SYSTEMS = ("student", "base", "teacher", "llm_judge", "factscore")
STUDENT_STAGES = ("stage1", "stage2", "stage3")
FIVE_LABEL_SYSTEMS = {"student", "base", "teacher"}   # VISTA pipelines; factscore has 2 labels, the judge none


class EvalError(ValueError):
    """A configuration or material problem that stops the whole evaluation."""


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

    def summary(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "description": self.description,
                "efficiency": self.efficiency}


@dataclass
class EvalResult:
    out_dir: Path
    results: dict[str, Any]
    systems: dict[str, SystemRun]


# -- material ------------------------------------------------------------------------------------------

def load_test_material(recipe: Recipe, input_path: str | None = None) -> tuple[list[Conversation], list[dict]]:
    """Conversations to evaluate on: ``input_path`` if given, else the recipe's held-out material
    (``data.test_fraction`` of each train source and/or the ``data.test`` sources)."""
    from ..distill.run import load_material, load_source

    if input_path:
        convs, report = load_source(DataSource(benchmark="file", source=input_path))
        return convs, [{"role": "test", **report}]
    if recipe.data.test_fraction > 0 or (recipe.data.test and recipe.data.leaks == "drop-test"):
        material = load_material(recipe)
        return material.test, list(material.reports)
    if recipe.data.test:
        from ..data.loading import check_unique_ids

        convs, reports, loaded = [], [], []
        for i, src in enumerate(recipe.data.test):
            c, report = load_source(src, recipe.data.root)
            convs += c
            loaded.append((f"data.test[{i}] {src.source}", c))
            reports.append({"role": "test", **report})
        check_unique_ids(loaded)
        return convs, reports
    raise EvalError(f"{recipe.path or 'recipe'}: no test material: pass --input FILE, or list data.test "
                    "sources, or set data.test_fraction")


def student_training_ids(recipe: Recipe) -> tuple[set[str], str]:
    """Conversation ids in the student's silver training split (``records.jsonl`` of the silver data)."""
    silver_dir = Path(recipe.resolve(recipe.train.silver_dir or recipe.distill.output_dir))
    path = silver_dir / "records.jsonl"
    if not path.exists():
        return set(), f"{path}: not found (no silver data: nothing to check the test material against)"
    ids: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise EvalError(f"{path}, line {n}: not valid JSON ({e})") from e
            if rec.get("split") == "train" and rec.get("kept", True):
                ids.add(str(rec.get("conversation_id")))
    return ids, str(path)


# -- measurement ---------------------------------------------------------------------------------------

class Meter:
    """Wall time, peak RSS (sampled every 50 ms by a thread), CUDA peak memory, backend token counters."""

    def __init__(self, backend: Any = None) -> None:
        self.backend = backend
        self.peak_rss = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(0.05)

    def _take(self) -> None:
        try:
            import psutil
        except ImportError:   # the process's lifetime peak instead (Linux reports KiB)
            import resource

            self.peak_rss = max(self.peak_rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
            return
        self.peak_rss = max(self.peak_rss, psutil.Process().memory_info().rss)

    def __enter__(self) -> Meter:
        import torch

        self.cuda = torch.cuda.is_available()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.stats_before = dict(getattr(self.backend, "stats", {}) or {})
        self._take()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        self.wall = time.perf_counter() - self.start
        self._stop.set()
        self._thread.join()
        self._take()
        self.cuda_peak = int(torch.cuda.max_memory_allocated()) if self.cuda else None
        after = getattr(self.backend, "stats", {}) or {}
        self.stats = {k: v - self.stats_before.get(k, 0) for k, v in after.items() if isinstance(v, (int, float))}

    def report(self, scored_turns: int) -> dict[str, Any]:
        hits, calls = self.stats.get("hits"), self.stats.get("calls")
        return {
            # a teacher answering from its call cache is not measuring the teacher's speed
            "cache_hit_share": round(hits / (hits + calls), 4) if hits is not None and calls is not None
            and hits + calls else None,
            "wall_s": round(self.wall, 3),
            "scored_turns": scored_turns,
            "turns_per_s": round(scored_turns / self.wall, 4) if self.wall else None,
            "prompt_tokens": self.stats.get("prompt_tokens"),
            "completion_tokens": self.stats.get("completion_tokens"),
            "backend_stats": {k: round(v, 3) if isinstance(v, float) else v for k, v in self.stats.items()},
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
            "cuda_max_memory_allocated_mb": round(self.cuda_peak / 2**20, 1) if self.cuda_peak is not None else None,
        }


def cost_per_1k_turns(recipe: Recipe, system: str, eff: dict[str, Any]) -> dict[str, Any] | None:
    """Cost per 1,000 scored turns from whichever prices the recipe configures for ``system``."""
    e = recipe.eval
    turns = eff.get("scored_turns") or 0
    if not turns:
        return None
    if system in e.price_per_1k_turns:
        return {"usd": e.price_per_1k_turns[system], "basis": "eval.price_per_1k_turns"}
    if system in e.price_per_1m_tokens:
        price = e.price_per_1m_tokens[system]
        usd = ((eff.get("prompt_tokens") or 0) * price.get("prompt", 0.0)
               + (eff.get("completion_tokens") or 0) * price.get("completion", 0.0)) / 1e6
        return {"usd": usd / turns * 1000, "basis": f"eval.price_per_1m_tokens {price}"}
    if system in e.price_per_hour:
        usd = e.price_per_hour[system] * eff["wall_s"] / 3600
        return {"usd": usd / turns * 1000, "basis": f"eval.price_per_hour {e.price_per_hour[system]} x wall time"}
    return None


# -- systems -------------------------------------------------------------------------------------------

def _speakers(recipe: Recipe) -> Speakers:
    user, _, assistant = recipe.distill.speakers.partition(",")
    return Speakers(user=user, assistant=assistant or "wizard")


def _engine_config(recipe: Recipe, style: str) -> EngineConfig:
    cfg = EngineConfig(style=style, speakers=_speakers(recipe), max_claims=recipe.distill.max_claims)
    cfg.max_new_tokens.update({k: v for k, v in recipe.eval.max_new_tokens.items() if k in cfg.max_new_tokens})
    return cfg


def _baseline_config(recipe: Recipe) -> BaselineConfig:
    cfg = BaselineConfig(speakers=_speakers(recipe), max_claims=recipe.distill.max_claims)
    cfg.max_new_tokens.update({k: v for k, v in recipe.eval.max_new_tokens.items() if k in cfg.max_new_tokens})
    return cfg


def _progress(name: str, backend: Any, enabled: bool) -> tuple[Callable[[str, int], None] | None, Callable[[], None]]:
    """A request-level progress bar (total grows as requests are issued)."""
    if not enabled:
        return None, lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(total=0, desc=f"eval {name}", unit="req", dynamic_ncols=True, mininterval=1.0)
    has_progress = hasattr(backend, "progress")
    if has_progress:
        backend.progress = bar.update

    def on_issue(stage: str, n: int) -> None:
        bar.total += n
        bar.set_postfix_str(stage, refresh=False)
        if not has_progress:
            bar.update(n)

    def close() -> None:
        bar.close()
        if has_progress:
            backend.progress = None

    return on_issue, close


def _records(results: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    return [t.to_dict() for turns in results for t in turns]


class _Backends:
    """Loads the base model once for base / llm_judge / factscore and the student (with adapters) once."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self._base: Any = None
        self.load_s: dict[str, float] = {}

    def base(self) -> Any:
        if self._base is None:
            from ..backends.transformers import TransformersBackend

            s = self.recipe.student
            t0 = time.perf_counter()
            self._base = TransformersBackend(s.model, dtype=s.dtype, load_in_4bit=s.load_in_4bit,
                                             batch_size=self.recipe.eval.batch_size,
                                             chat_template_kwargs=s.chat_template_kwargs,
                                             attn_implementation=s.attn_implementation)
            self.load_s["base"] = round(time.perf_counter() - t0, 3)
        return self._base

    def release_base(self) -> None:
        self._base = None
        _free_memory()

    def adapters_dir(self) -> Path:
        return Path(self.recipe.resolve(self.recipe.train.output_dir))

    def student(self) -> Any:
        from ..backends.transformers import TransformersBackend

        root = self.adapters_dir()
        want = [s for s in self.recipe.train.stages if s in STUDENT_STAGES] or list(STUDENT_STAGES)
        missing = [s for s in want if not (root / s / "adapter_config.json").exists()]
        if missing:
            raise SystemSkipped(
                f"no trained adapter for {', '.join(missing)} under {root} (expected "
                f"{', '.join(str(root / s / 'adapter_config.json') for s in missing)}); train them with "
                f"`vista-distill train --config {self.recipe.path or 'RECIPE'}`")
        s = self.recipe.student
        t0 = time.perf_counter()
        backend = TransformersBackend(s.model, adapters={st: root / st for st in want}, dtype=s.dtype,
                                      load_in_4bit=s.load_in_4bit, batch_size=self.recipe.eval.batch_size,
                                      chat_template_kwargs=s.chat_template_kwargs,
                                      attn_implementation=s.attn_implementation)
        self.load_s["student"] = round(time.perf_counter() - t0, 3)
        return backend


def _free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _describe_local(backend: Any, style: str, adapters: dict[str, str] | None = None) -> dict[str, Any]:
    return {"backend": backend.name, "model_path": str(backend.model_path), "dtype": str(backend.torch_dtype),
            "hardware": backend.hardware.to_dict(),
            "device": backend.device, "prompts": style, "adapters": adapters, "batch_size": backend.batch_size}


def run_system(name: str, recipe: Recipe, conversations: list[Conversation], backends: _Backends,
               out_dir: Path, progress: bool = False) -> SystemRun:
    """Run one system over ``conversations``; prerequisites missing -> status ``skipped`` with the reason."""
    run = SystemRun(name)
    scored = sum(len(c.scored_turns) for c in conversations)
    try:
        if name in ("base", "llm_judge", "factscore"):
            backend = backends.base()
            if name == "base":
                cfg = _engine_config(recipe, "fewshot")
                programs = [vista_program(c, cfg) for c in conversations]
                run.description = {**_describe_local(backend, "fewshot"), "stage2": cfg.stage2, "stage3": cfg.stage3}
            else:
                bcfg = _baseline_config(recipe)
                programs = baseline_programs(name, conversations, bcfg)
                run.description = {**_describe_local(backend, "fewshot"), "baseline": name}
            run.description["load_s"] = backends.load_s.get("base")
        elif name == "student":
            backend = backends.student()
            style = recipe.distill.student_prompt_style
            cfg = _engine_config(recipe, style)
            programs = [vista_program(c, cfg) for c in conversations]
            run.description = {**_describe_local(backend, style, {k: str(v) for k, v in backend.adapters.items()}),
                               "stage2": cfg.stage2, "stage3": cfg.stage3, "load_s": backends.load_s.get("student")}
        elif name == "teacher":
            backend, programs, run.description = _teacher(recipe, conversations, out_dir)
        else:
            raise EvalError(f"eval.systems: unknown system {name!r}; valid: {', '.join(SYSTEMS)}")
    except SystemSkipped as e:
        run.status, run.reason = "skipped", str(e)
        return run
    except EvalError:
        raise
    except Exception as e:   # a teacher server that is down, a broken adapter: report, go on
        log.exception("system %s could not start", name)
        run.status, run.reason = "failed", f"{type(e).__name__}: {e}"
        return run
    meter_backend = getattr(backend, "core_for_stats", backend)
    on_issue, close = _progress(name, getattr(backend, "progress_target", backend), progress)
    try:
        with Meter(meter_backend) as meter:
            results = run_programs(programs, backend, batched=True, on_issue=on_issue)
    except Exception as e:
        log.exception("system %s failed", name)
        run.status, run.reason = "failed", f"{type(e).__name__}: {e}"
        return run
    finally:
        close()
    run.records = _records(results)
    run.efficiency = meter.report(scored)
    if name == "llm_judge":   # how the judge's answers were read (json / field / bare / yes/no / unread)
        how = Counter(str((r.get("judge") or {}).get("parsed_from")) for r in run.records if r["scored"])
        run.description["judge_parsed_from"] = {k.replace("None", "unread"): v for k, v in sorted(how.items())}
    if name == "student":
        del backend
        _free_memory()
    cost = cost_per_1k_turns(recipe, name, run.efficiency)
    run.efficiency["cost_per_1k_turns"] = cost
    return run


class _TeacherChain:
    """The teacher's backend chain with the innermost backend exposed for stats and progress."""

    def __init__(self, teacher: Any) -> None:
        self.teacher = teacher
        self.name = teacher.name
        self.core_for_stats = teacher.core
        self.progress_target = teacher.core

    def run(self, requests: list) -> list:
        return self.teacher.backend.run(requests)


def _teacher(recipe: Recipe, conversations: list[Conversation], out_dir: Path) -> tuple[Any, list, dict[str, Any]]:
    from ..backends.cache import CallCache
    from ..backends.teacher import build_teacher
    from ..distill.run import engine_config

    distill_dir = Path(recipe.resolve(recipe.distill.output_dir))
    calls = distill_dir / "calls"
    cache_dir = calls if calls.is_dir() else out_dir / "teacher_calls"
    cache = CallCache(cache_dir)
    before = len(cache)
    teacher = build_teacher(recipe, conversations, cache)
    cfg = engine_config(recipe)
    programs = [vista_program(c, cfg) for c in conversations]
    desc = {**teacher.description, "call_cache": str(cache_dir), "cache_entries_before": before,
            "prompts": cfg.style, "stage2": cfg.stage2, "stage3": cfg.stage3}
    if recipe.teacher.backend == "labels":
        desc["note"] = ("labels teacher: stages 1-3 are answered from the human claim labels of the test "
                        "material itself, so its claim scores are an upper bound, not an independent system")
    return _TeacherChain(teacher), programs, desc


# -- metrics, significance, results --------------------------------------------------------------------

def _pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def significance(runs: dict[str, SystemRun], rules: Sequence[str], variant: str) -> dict[str, Any]:
    """McNemar for every pair of systems, per rule, per benchmark and overall (unknown = wrong)."""
    ok = [n for n, r in runs.items() if r.status == "ok"]
    out: dict[str, Any] = {}
    for rule in rules:
        correct = {n: M.correctness(runs[n].records, rule) for n in ok}
        sources = {n: {M.turn_key(r): r["source"] for r in M.gold_turns(runs[n].records)} for n in ok}
        per_rule: dict[str, list] = {}
        for a, b in _pairs(ok):
            common = sorted(set(correct[a]) & set(correct[b]))
            groups: dict[str, list] = {}
            for k in common:
                groups.setdefault(sources[a][k], []).append(k)
            groups = {**dict(sorted(groups.items())), M.OVERALL: common}
            for group, keys in groups.items():
                res = paired_mcnemar([correct[a][k] for k in keys], [correct[b][k] for k in keys], variant)
                per_rule.setdefault(group, []).append({"system_1": a, "system_2": b, **res})
        out[rule] = per_rule
    return out


def add_common_coverage(metrics: dict[str, Any], runs: dict[str, SystemRun], rules: Sequence[str]) -> dict[str, Any]:
    """Accuracy over the gold turns every system that ran gave a verdict (``M.common_coverage``), per rule:
    written beside each system's own accuracy (``accuracy_common``, ``n_common``) and returned as
    ``{"systems": [...], "by_rule": {rule: {group: ...}}}``."""
    ok = {n: r.records for n, r in runs.items() if r.status == "ok"}
    by_rule = {rule: M.common_coverage(ok, rule) for rule in rules}
    for rule, groups in by_rule.items():
        for group, c in groups.items():
            for name in ok:
                t = metrics[name].get(group, {}).get("turn", {}).get(rule)
                if t is not None:
                    t.update(accuracy_common=c["accuracy"][name], n_common=c["n"])
    return {"systems": list(ok), "by_rule": by_rule}


def bootstrap_intervals(runs: dict[str, SystemRun], rules: Sequence[str], n_resamples: int,
                        seed: int) -> dict[str, Any]:
    """Seeded percentile intervals on accuracy (turns with a verdict) and accuracy_all (unknown = wrong)."""
    out: dict[str, Any] = {}
    for name, run in runs.items():
        if run.status != "ok":
            continue
        per: dict[str, Any] = {}
        for rule in rules:
            per[rule] = {}
            for group, rs in M.by_source(run.records).items():
                gold = M.gold_turns(rs)
                known = [r for r in gold if r["verdicts"].get(rule, "unknown") != "unknown"]
                per[rule][group] = {
                    "accuracy": bootstrap_accuracy([r["verdicts"][rule] == r["gold_label"] for r in known],
                                                   n_resamples, seed),
                    "accuracy_all": bootstrap_accuracy([r["verdicts"].get(rule) == r["gold_label"] for r in gold],
                                                       n_resamples, seed),
                }
        out[name] = per
    return out


def fingerprint(results: dict[str, Any]) -> str:
    """sha256 over everything that must be identical on a re-run (metrics, tests, intervals; no timings)."""
    keys = ("material", "metrics", "common_coverage", "majority", "significance", "bootstrap", "claim_matching")
    payload = json.dumps({k: results.get(k) for k in keys}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def compare_results(current: dict[str, Any], previous_path: str | Path) -> dict[str, Any]:
    """Compare the reproducible sections with an earlier ``results.json``; list the first differences."""
    prev = json.loads(Path(previous_path).read_text(encoding="utf-8"))
    diffs: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(diffs) >= 20:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b:
                    diffs.append(f"{path}.{k}: only in {'current' if k in a else 'previous'}")
                else:
                    walk(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            diffs.append(f"{path}: {b!r} -> {a!r}")

    for k in ("material", "metrics", "common_coverage", "majority", "significance", "bootstrap", "claim_matching"):
        walk(current.get(k), prev.get(k), k)
    return {"previous": str(previous_path), "previous_fingerprint": prev.get("fingerprint"),
            "identical": current["fingerprint"] == prev.get("fingerprint"), "differences": diffs}


def run_eval(recipe: Recipe, *, input_path: str | None = None, limit: int | None = None,
             systems: Sequence[str] | None = None, output_dir: str | Path | None = None,
             progress: bool = False, compare: str | Path | None = None,
             on_system: Callable[[SystemRun], None] | None = None) -> EvalResult:
    """Evaluate the recipe's systems on the test material; write the run folder (see :mod:`.report`).

    ``on_system`` is told about each system as soon as it has run (or been skipped)."""
    from .report import write_report

    e = recipe.eval
    if e.mcnemar not in MCNEMAR_VARIANTS:
        raise EvalError(f"eval.mcnemar must be one of {MCNEMAR_VARIANTS}, got {e.mcnemar!r}")
    bad_rules = [r for r in e.rules if r not in RULES]
    if bad_rules or not e.rules:
        raise EvalError(f"eval.rules must list one or more of {', '.join(RULES)}, got {e.rules!r}")
    names = list(systems or e.systems)
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise EvalError(f"unknown system(s) {unknown}; valid: {', '.join(SYSTEMS)}")
    out_dir = Path(output_dir or recipe.resolve(e.output_dir))
    t_start = time.perf_counter()

    conversations, reports = load_test_material(recipe, input_path)
    train_ids, train_ids_source = student_training_ids(recipe)
    seen = [c.id for c in conversations if c.id in train_ids]
    if e.heldout_only:
        conversations = [c for c in conversations if c.id not in train_ids]
    if limit:
        conversations = conversations[:limit]
    if not conversations:
        raise EvalError("no conversations left to evaluate (check --input, --limit and eval.heldout_only)")
    out_dir.mkdir(parents=True, exist_ok=True)
    material = {
        "sources": reports, "input": input_path, "limit": limit, "heldout_only": e.heldout_only,
        "conversations": len(conversations),
        "scored_turns": sum(len(c.scored_turns) for c in conversations),
        "gold_turns": sum(1 for c in conversations for i in c.scored_turns if c.turns[i].gold_label in ("faithful", "hallucinated")),
        "human_claims": sum(len(c.turns[i].gold_claims or []) for c in conversations for i in c.scored_turns),
        "conversation_ids_sha256": hashlib.sha256("\n".join(c.id for c in conversations).encode()).hexdigest()[:16],
        "student_training_overlap": {
            "checked_against": train_ids_source,
            "evaluated_conversations_in_student_training": len([c for c in conversations if c.id in train_ids]),
            "test_conversations_in_student_training": len(seen),
        },
    }

    backends = _Backends(recipe)
    runs: dict[str, SystemRun] = {}
    # base-model systems first (one model load), then the student, then the teacher
    order = sorted(names, key=lambda n: ("base", "llm_judge", "factscore", "student", "teacher").index(n))
    import torch

    from ..hardware import prepare_run

    threads_before = torch.get_num_threads()
    hw = prepare_run(recipe.student.dtype, e.threads if e.threads is not None else threads_before,
                     where="student.dtype", announce=progress)
    try:
        for name in order:
            if name in ("student", "teacher"):
                backends.release_base()
            log.info("eval: running %s on %d conversations", name, len(conversations))
            runs[name] = run_system(name, recipe, conversations, backends, out_dir, progress)
            if on_system is not None:
                on_system(runs[name])
    finally:
        backends.release_base()
        torch.set_num_threads(threads_before)
    runs = {n: runs[n] for n in names}
    records_dir = out_dir / "records"
    records_dir.mkdir(exist_ok=True)
    for name, run in runs.items():
        if run.status == "ok":
            atomic_write_text(records_dir / f"{name}.jsonl",
                              "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in run.records))

    matcher = M.ClaimMatcher(threshold=e.match_threshold, use_embeddings=e.match_embeddings)
    metrics: dict[str, Any] = {}
    for name, run in runs.items():
        if run.status != "ok":
            continue
        matches = M.match_records(run.records, matcher) if name != "llm_judge" else None
        metrics[name] = M.system_metrics(run.records, e.rules, matches, five_labels=name in FIVE_LABEL_SYSTEMS,
                                         n_bins=e.calibration_bins)
    common = add_common_coverage(metrics, runs, e.rules)
    any_records = next((r.records for r in runs.values() if r.status == "ok"), [])
    majority = {group: {"turn": M.majority_turn_metrics(rs), "claim": M.majority_claim_metrics(rs)}
                for group, rs in M.by_source(any_records).items()}
    results: dict[str, Any] = {
        "recipe": recipe.name, "recipe_path": recipe.path,
        "settings": {"rules": list(e.rules), "systems": names, "seed": e.seed, "bootstrap": e.bootstrap,
                     "mcnemar": e.mcnemar, "match_threshold": e.match_threshold,
                     "match_embeddings": e.match_embeddings, "calibration_bins": e.calibration_bins,
                     "batch_size": e.batch_size, "threads": hw.threads.threads},
        "material": material,
        "systems": {n: r.summary() for n, r in runs.items()},
        "metrics": metrics,
        "common_coverage": common,
        "majority": majority,
        "claim_matching": {"method": "normalised text, then " + (matcher.embedding_status if e.match_embeddings
                                                                else "no embeddings (eval.match_embeddings false)"),
                           "threshold": e.match_threshold},
        "significance": {"test": f"McNemar ({e.mcnemar}; statsmodels), pairs over gold turns, unknown = wrong",
                         "by_rule": significance(runs, e.rules, e.mcnemar)},
        "bootstrap": bootstrap_intervals(runs, e.rules, e.bootstrap, e.seed),
    }
    results["fingerprint"] = fingerprint(results)
    results["wall_s"] = round(time.perf_counter() - t_start, 3)
    results["hardware"] = hw.to_dict()   # beside the timings, outside the fingerprint
    if compare:
        results["compare"] = compare_results(results, compare)
    write_report(out_dir, results)
    return EvalResult(out_dir, results, runs)


__all__ = ["run_eval", "run_system", "load_test_material", "EvalResult", "SystemRun", "EvalError", "SYSTEMS",
           "significance", "bootstrap_intervals", "add_common_coverage", "compare_results", "fingerprint", "cost_per_1k_turns"]
