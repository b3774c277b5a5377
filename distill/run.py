"""``run_distill``: a recipe in, silver data out (the engine behind ``vista-distill distill``).

1. load the recipe's train and test material and check that no test dialogue leaks into train;
2. run the VISTA pipeline over the train material with the teacher (every call cached on disk in
   ``<output_dir>/calls/``, so a rerun after any interruption repeats no completed call);
3. build one candidate per teacher call, filter, split by dialogue and export ``stage1/``,
   ``stage2/``, ``stage3/`` (``datasets`` folders with cards), ``records.jsonl`` (provenance per
   call) and ``manifest.json``; append this invocation's counters to ``runs.jsonl``.

The export depends only on the teacher's answers, so a resumed run writes the same files (the
manifest carries no timings; those are in ``records.jsonl`` and ``runs.jsonl``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..backends.cache import CallCache
from ..backends.openai_compat import ServerError, ServerUnavailable
from ..backends.teacher import Teacher, build_teacher
from ..config import Recipe
from ..data.io import atomic_write_text
from ..data.material import Material, load_material
from ..data.schema import Conversation
from ..pipeline.engine import RULES, TurnResult, run_programs, vista_program
from ..pipeline.templates import PROMPTS_VERSION, get_template
from ..runtime.exit_codes import writable_dir
from ..runtime.progress import RequestBar
from . import augment, contrast, silver

log = logging.getLogger(__name__)

# Fault injection for the SIGKILL tests: VISTA_DISTILL_DIE_AT=export:<stage> kills this process
# just before that stage folder is swapped in.
DIE_AT_ENV = "VISTA_DISTILL_DIE_AT"


def filter_settings(recipe: Recipe) -> silver.FilterSettings:
    d = recipe.distill
    if d.rule not in RULES:
        raise ValueError(f"distill.rule must be one of {', '.join(RULES)}, got {d.rule!r}")
    if not 0.0 <= d.validation_fraction < 1.0:
        raise ValueError(f"distill.validation_fraction must be in [0, 1), got {d.validation_fraction}")
    if d.augment_falsified < 0:
        raise ValueError(f"distill.augment_falsified must be >= 0 (pairs per reference), got {d.augment_falsified}")
    if not 0.0 <= d.augment_swapped <= 1.0:
        raise ValueError(
            f"distill.augment_swapped must be in [0, 1] (share of VERIFIED claims), got {d.augment_swapped}"
        )
    if not 0.0 <= d.evidence_contrast <= 1.0:
        raise ValueError(
            f"distill.evidence_contrast must be in [0, 1] (share of stage 2 claims), got {d.evidence_contrast}"
        )
    bad = [k for k in d.evidence_contrast_kinds if k not in contrast.KINDS]
    if bad:
        raise ValueError(f"distill.evidence_contrast_kinds: unknown {bad}; valid: {', '.join(contrast.KINDS)}")
    return silver.FilterSettings(rule=d.rule, gold_agreement=d.filter_gold_agreement,
                                 self_consistency_k=d.self_consistency_k,
                                 min_agreement=d.self_consistency_min_agreement, dedup=d.dedup,
                                 balance=d.balance_classes, balance_max_ratio=d.balance_max_ratio,
                                 validation_fraction=d.validation_fraction, seed=recipe.data.seed)


class Progress:
    """A live bar over teacher requests: new calls, cache hits, failures, parse failures, req/s."""

    def __init__(self, teacher: Teacher, enabled: bool) -> None:
        self.stats = teacher.core.stats
        self.parse_failures = 0
        self.truncated_turns = 0                  # stage 1 still cut at its budget after the retry
        self.claims_dropped: dict[str, int] = {}  # by reason (duplicate, over_max_claims, truncated_line, ...)
        self.start = time.perf_counter()
        self.bar = RequestBar("distill", teacher.core, enabled=enabled, total=0, mininterval=0.5,
                              postfix=self._postfix)
        self.sent = 0

    def on_issue(self, stage: str, n: int) -> None:
        """``n`` teacher requests of ``stage`` sent: the bar's total grows (stage 1's all at once)."""
        self.sent += n
        self.bar.on_issue(stage, n)

    def on_turn(self, res: TurnResult) -> None:
        self.parse_failures += (not res.claims) + sum(c.error is not None for c in res.claims)
        self.truncated_turns += res.stage1_truncated
        for why, n in res.claims_dropped.items():
            self.claims_dropped[why] = self.claims_dropped.get(why, 0) + n
        self.bar.show()

    def _postfix(self) -> str:
        s = self.stats
        rate = s.get("calls", 0) / max(time.perf_counter() - self.start, 1e-9)
        return (f"calls {s.get('calls', 0)} | cache hits {s.get('hits', 0)} | failures {s.get('failures', 0)} | "
                f"parse failures {self.parse_failures} | {rate:.2f} req/s")

    def close(self) -> None:
        self.bar.close()


@dataclass
class DistillResult:
    out_dir: Path
    manifest: dict[str, Any]
    run: dict[str, Any]


def counters(teacher: Teacher, cache: CallCache, wall: float, bar: Progress, requests: int) -> dict[str, Any]:
    s = dict(teacher.core.stats)
    return {
        "requests": requests,
        "cache_hits": s.get("hits", 0),
        "calls": s.get("calls", 0),
        "failures": s.get("failures", 0),
        "retries": s.get("retries", 0),
        "parse_failures": bar.parse_failures,
        "stage1_truncated_turns": bar.truncated_turns,
        "claims_dropped": dict(sorted(bar.claims_dropped.items())),
        "cache_entries": len(cache),
        "cache_overwrites": cache.stats["overwrites"],
        "cache_misses": cache.stats["misses"],
        "cache_unreadable": cache.stats["unreadable"],
        "wall_s": round(wall, 3),
        "calls_per_s": round(s.get("calls", 0) / wall, 3) if wall else None,
        "prompt_tokens": s.get("prompt_tokens", 0),
        "completion_tokens": s.get("completion_tokens", 0),
    }


def _append_run(out_dir: Path, record: dict[str, Any]) -> None:
    with open(out_dir / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run_distill(recipe: Recipe, *, limit: int | None = None, progress: bool = True,
                output_dir: str | os.PathLike | None = None,
                material: Material | None = None) -> DistillResult:
    """Run the teacher over the recipe's train material and export silver data (see the module doc).

    Raises :class:`ServerError` (server absent, key refused), :class:`ServerUnavailable` (retries
    ran out mid-run: rerun to resume) and ``LeakageError`` (test material in train). ``material``: the
    recipe's material if the caller has loaded it already (:func:`load_material`).
    """
    out_dir = writable_dir(output_dir or recipe.resolve(recipe.distill.output_dir), "silver data folder",
                           "--output-dir or distill.output_dir")
    silver.clean_partial(out_dir)
    material = material if material is not None else load_material(recipe)
    train = material.train[:limit] if limit else material.train
    settings = filter_settings(recipe)
    cfg = recipe.engine_config("teacher")
    student_style = recipe.pipeline.student_prompt_style
    stages = silver.stages_for(recipe.pipeline.world.enabled)
    for stage in stages:
        get_template(stage, student_style)   # fail early on a bad style
    hw = _teacher_hardware(recipe, announce=progress)
    cache = CallCache(out_dir / "calls")
    teacher = build_teacher(recipe, train, cache)
    bar = Progress(teacher, progress)
    start = time.perf_counter()
    status = "stopped"
    try:
        results = run_programs((vista_program(c, cfg, bar.on_turn) for c in train), teacher.backend,
                               on_issue=bar.on_issue)
        status = "completed"
    finally:
        bar.close()
        run = {"recipe": recipe.name, "status": status, "started": round(time.time() - (time.perf_counter() - start)),
               **counters(teacher, cache, time.perf_counter() - start, bar, bar.sent),
               "hardware": hw.to_dict() if hw is not None else None}
        if status != "completed":
            _append_run(out_dir, run)

    candidates = silver.collect_candidates(train, results, settings)
    rule_made, contrast_made = _rule_made_candidates(recipe, train, results, settings)
    candidates += rule_made
    silver.apply_split_and_filters(train, candidates, settings)
    data = {stage: {split: silver.rows(candidates, stage, split, student_style, cfg.speakers, teacher.name)
                    for split in ("train", "validation")} for stage in stages}
    export = _Export(data, candidates, contrast_made, _data_report(material, train, limit))
    manifest = _manifest(recipe, teacher, cfg, settings, hw, export)
    records = [_record(c, teacher, cfg.style, student_style) for c in candidates]
    atomic_write_text(out_dir / "records.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    die_at = os.environ.get(DIE_AT_ENV, "")
    for stage in stages:
        if die_at == f"export:{stage}":
            os.kill(os.getpid(), signal.SIGKILL)
        silver.save_stage(out_dir / stage, data[stage], silver.card(stage, manifest["counts"][stage],
                                                                     manifest["filters"]["report"][stage], manifest))
    atomic_write_text(out_dir / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    run["fingerprint"] = manifest["fingerprint"]
    _append_run(out_dir, run)
    return DistillResult(out_dir, manifest, run)


def _rule_made_candidates(recipe: Recipe, train: list[Conversation], results: list[list[TurnResult]],
                          settings: silver.FilterSettings) -> tuple[list[silver.Candidate], dict[str, Any]]:
    """Rows made by rule from the train split's references, after the teacher's (deduplication keeps those):
    falsified and swapped claims, and evidence contrasts (with what the contrasts made, by kind)."""
    d = recipe.distill
    if not (d.augment_falsified or d.augment_swapped or d.evidence_contrast):
        return [], {}
    where = silver.dialogue_splits(train, settings)
    train_dialogues = {dlg for dlg, split in where.items() if split == "train"}
    rows = augment.falsified_candidates(train, results, d.augment_falsified, settings.seed, train_dialogues)
    rows += augment.swapped_candidates(train, results, d.augment_swapped, settings.seed, train_dialogues)
    contrasted, made = contrast.contrast_candidates(train, results, d.evidence_contrast, settings.seed, train_dialogues,
                                                    d.evidence_contrast_kinds)
    return rows + contrasted, made


@dataclass(frozen=True)
class _Export:
    """What a run exports: each stage's rows by split, the candidates they came from, what the evidence contrasts
    made, and the data they were drawn from (:func:`_data_report`)."""

    data: dict[str, Any]
    candidates: list[silver.Candidate]
    contrast_made: dict[str, Any]
    data_report: dict[str, Any]


def _data_report(material: Material, train: list[Conversation], limit: int | None) -> dict[str, Any]:
    """The manifest's ``data``: the sources, the conversations the teacher ran on and the leak check."""
    return {"sources": material.reports, "train_conversations": len(train), "test_conversations": len(material.test),
            "limit": limit,
            "leak_check": f"passed: {len(material.test)} test conversation(s) share no dialogue with "
                          f"{len(material.train)} train conversation(s)"}


def _manifest(recipe: Recipe, teacher: Teacher, cfg: Any, settings: silver.FilterSettings, hw: Any,
              export: _Export) -> dict[str, Any]:
    """manifest.json: the teacher, templates, engine settings, filters, data, counts, hardware and fingerprints."""
    data, candidates = export.data, export.candidates
    student_style = recipe.pipeline.student_prompt_style
    stages = list(data)
    fps = {stage: silver.fingerprint(data[stage]) for stage in stages}
    d = recipe.distill
    manifest = {
        "recipe": recipe.name, "recipe_path": recipe.path, "teacher": teacher.name,
        "teacher_config": teacher.description,
        "student_prompt_style": student_style, "prompt_version": PROMPTS_VERSION,
        "templates": {stage: {"teacher": get_template(stage, cfg.style).fingerprint,
                              "student": get_template(stage, student_style).fingerprint} for stage in stages},
        "engine": {"style": cfg.style, "stage2": cfg.stage2, "stage3": cfg.stage3, "max_claims": cfg.max_claims,
                   "max_new_tokens": cfg.max_new_tokens, "speakers": asdict(cfg.speakers)},
        "filters": {"settings": asdict(settings), "report": silver.filter_report(candidates, stages)},
        "data": export.data_report,
        "counts": silver.stage_counts(data),
        # what the teacher computed in on this machine (threads and timings are in runs.jsonl)
        "hardware": ({k: hw.to_dict()[k] for k in ("dtype", "dtype_reason", "device", "device_name", "cpu")}
                     if hw is not None else {"teacher": "served or human labels: precision is the server's"}),
        "fingerprints": fps,
        "fingerprint": silver.fingerprint(fps),
    }
    if d.augment_falsified:
        manifest["augment"] = augment.summary(candidates, d.augment_falsified)
    if d.augment_swapped:
        manifest["augment_swapped"] = augment.swap_summary(candidates, d.augment_swapped)
    if d.evidence_contrast:
        manifest["evidence_contrast"] = contrast.summary(candidates, export.contrast_made)
    return manifest


def _teacher_hardware(recipe: Recipe, announce: bool):
    """Precision and threads of a local teacher (None for a served one), said on the first line."""
    import sys

    from ..runtime.hardware import prepare_run

    t = recipe.teacher
    if t.backend == "transformers" or (t.backend == "labels" and t.fallback and not t.base_url):
        return prepare_run(t.dtype, t.threads, where="teacher.dtype", announce=announce)
    if announce:
        print(f"teacher {t.backend}: precision and threads are the server's (no local model)", file=sys.stderr,
              flush=True)
    return None


def _record(c: silver.Candidate, teacher: Teacher, teacher_style: str, student_style: str) -> dict[str, Any]:
    meta = c.response.meta if c.response is not None else {}
    return {
        "stage": c.stage, "conversation_id": c.conversation_id, "dialogue_id": c.dialogue_id, "source": c.source,
        "turn_index": c.turn_index, "claim_index": c.claim_index, "claim": c.claim,
        "teacher": c.extra.get("teacher", teacher.name), "teacher_prompt_style": teacher_style,
        "student_prompt_style": student_style,
        "prompt_version": PROMPTS_VERSION, "template": get_template(c.stage, teacher_style).fingerprint,
        "cache_key": meta.get("cache_key"),
        "raw": meta.get("raw", c.response.text if c.response is not None else None),
        "think": meta.get("think", ""), "finish_reason": meta.get("finish_reason"), "retry": meta.get("retry"),
        "parsed": c.parsed, "parse_status": "failed" if c.error else "ok",
        "error": c.error, "agreement": c.agreement, "votes": meta.get("votes"),
        "latency_s": meta.get("latency_s"), "attempts": meta.get("attempts"),
        "prompt_tokens": getattr(c.response, "prompt_tokens", None),
        "completion_tokens": getattr(c.response, "completion_tokens", None),
        "gold_label": c.gold_label, "teacher_verdict": c.teacher_verdict, "split": c.split,
        "kept": c.drop is None, "drop_reason": c.drop, "drop_detail": c.drop_detail,
        **({"augment": c.extra["augment"]} if "augment" in c.extra else {}),
    }


__all__ = ["DistillResult", "ServerError", "ServerUnavailable", "run_distill"]
