"""``run_eval``: a recipe and test material in, a run folder out (the engine behind ``vista-distill eval``).

The test material (:func:`load_test_material`), checked against the student's silver training data;
then the systems (``eval.systems``, in that order in the report; :mod:`.systems`):

* ``student``: the recipe's student model with the three stage adapters from ``train.output_dir``,
  the compact student prompts (``pipeline.student_prompt_style``);
* ``base``: the same model untuned, with the few-shot Appendix A.1 prompts;
* ``teacher``: the recipe's teacher through the distill call cache (``<distill.output_dir>/calls``):
  cached answers are reused, missing ones are asked live (a ``labels`` teacher answers from the
  human claims of the test material itself, so it is an upper bound rather than a competitor);
* ``llm_judge`` and ``factscore``: the baselines (:mod:`.baselines`) on the base model's backend;
* ``majority``, ``overlap``, ``pmi``: the cheap baselines a student must beat (:mod:`..backends.cheap_baselines`).

A system whose prerequisites are missing (no adapters, no teacher server) is reported as skipped
with the reason. Each system's wall time, tokens and peak memory are measured separately
(:mod:`.efficiency`); :mod:`.metrics` scores each one, :mod:`.comparison` compares them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import DataSource, Recipe
from ..data.io import atomic_write_text
from ..data.material import Material, load_material, load_source
from ..data.schema import Conversation
from ..pipeline.engine import RULES
from ..runtime.exit_codes import writable_dir
from ..scoring import metrics as M
from ..scoring.evidence import evidence_metrics
from ..scoring.significance import MCNEMAR_VARIANTS
from .budget import budget_order, next_round, probed_conversations
from .comparison import (
    add_common_coverage,
    bootstrap_intervals,
    compare_results,
    fingerprint,
    given_claims_section,
    significance,
)
from .errors import EvalError
from .stage_rules import stage_rules_section
from .systems import (
    FIVE_LABEL_SYSTEMS,
    PIPELINE_SYSTEMS,
    RUN_ORDER,
    SYSTEMS,
    EvalProgress,
    ModelLoader,
    SystemRun,
    merge_runs,
    run_system,
)
from .tuning import tuned_section, tuning_runs

log = logging.getLogger(__name__)


@dataclass
class EvalResult:
    out_dir: Path
    results: dict[str, Any]
    systems: dict[str, SystemRun]


# -- material ------------------------------------------------------------------------------------------

def load_test_material(recipe: Recipe, input_path: str | None = None,
                       material: Material | None = None) -> tuple[list[Conversation], list[dict]]:
    """Conversations to evaluate on: ``input_path`` if given, else the recipe's held-out material
    (``data.test_fraction`` of each train source and/or the ``data.test`` sources). ``material``: the
    recipe's material if the caller has loaded it already (:func:`load_material`)."""
    if input_path:
        from ..data.benchmarks import guess_benchmark

        # our schema or the authors' JSON; FHSumBench's own JSON is recognised by its path
        bench = "fhsumbench" if guess_benchmark(input_path) == "fhsumbench" else "file"
        convs, report = load_source(DataSource(benchmark=bench, source=input_path))
        return convs, [{"role": "test", **report}]
    if recipe.data.test_fraction > 0 or (recipe.data.test and recipe.data.leaks == "drop-test"):
        material = material if material is not None else load_material(recipe)
        return material.test, list(material.reports)
    if recipe.data.test:
        from ..data.loading import validate_unique_ids

        convs, reports, loaded = [], [], []
        for i, src in enumerate(recipe.data.test):
            c, report = load_source(src, recipe.data.root)
            convs += c
            loaded.append((f"data.test[{i}] {src.source}", c))
            reports.append({"role": "test", **report})
        validate_unique_ids(loaded)
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


def _counts(conversations: list[Conversation]) -> dict[str, Any]:
    """What the material section says about the conversations evaluated."""
    return {
        "conversations": len(conversations),
        "scored_turns": sum(len(c.scored_turns) for c in conversations),
        "gold_turns": sum(1 for c in conversations for i in c.scored_turns
                          if c.turns[i].gold_label in ("faithful", "hallucinated")),
        "human_claims": sum(len(c.turns[i].gold_claims or []) for c in conversations for i in c.scored_turns),
        "conversation_ids_sha256": hashlib.sha256("\n".join(c.id for c in conversations).encode()).hexdigest()[:16],
    }


def _journal(out_dir: Path, recipe: Recipe, ordered: list[Conversation], systems: list[str], backends: ModelLoader):
    """The run folder's journal (:mod:`..pipeline.journal`): each system's round is appended as it finishes, so a
    killed eval started again with the same command reuses them. It belongs to these conversations, this recipe,
    these systems and these adapter files (size and time: retrained adapters start over)."""
    from ..pipeline.journal import Journal, run_fingerprint

    adapters = sorted((str(f), f.stat().st_size, f.stat().st_mtime_ns)
                      for f in backends.adapters_dir().glob("*/adapter_model.safetensors"))
    if recipe.eval.calibration:   # the calibration applied, by its content (calibrate again under the name: anew)
        from ..backends.calibration import calibration_path

        cal = calibration_path(backends.adapters_dir(), recipe.eval.calibration)
        adapters.append((str(cal), cal.read_text(encoding="utf-8") if cal.is_file() else None, 0))
    return Journal(out_dir / "journal.jsonl", run_fingerprint(ordered, recipe, {"systems": systems,
                                                                                  "adapters": adapters},
                                                              recipe.eval.round_size))


def run_eval(recipe: Recipe, *, input_path: str | None = None, limit: int | None = None,
             systems: Sequence[str] | None = None, output_dir: str | Path | None = None,
             compare: str | Path | None = None, material: Material | None = None,
             progress: EvalProgress | None = None) -> EvalResult:
    """Evaluate the recipe's systems on the test material; write the run folder (see :mod:`.report`).

    The steps: the material, the systems' rounds (journalled, so a cut run resumes), the records, the metrics
    and the reports. ``progress``: the bars and the callback told about each system (:class:`.systems.EvalProgress`;
    None: neither); ``material``: the recipe's material if the caller has loaded it already (see
    :func:`load_test_material`)."""
    import torch

    from ..runtime.hardware import prepare_run

    e, progress = recipe.eval, progress if progress is not None else EvalProgress()
    names = _validated_systems(recipe, systems)
    out_dir = Path(output_dir or recipe.resolve(e.output_dir))
    t_start = time.perf_counter()
    conversations, material_info = _evaluated_material(recipe, input_path, limit, material)
    writable_dir(out_dir, "evaluation folder", "--output-dir or eval.output_dir")   # before any model loads

    backends = ModelLoader(recipe, cache_root=out_dir)
    if e.calibration and "student" in names:   # a missing or damaged one fails here, before any model loads
        from ..backends.calibration import Calibration

        if line := Calibration.load(backends.adapters_dir(), e.calibration).rule_line():
            log.warning("eval student: %s", line)
    order = sorted(names, key=RUN_ORDER.index)
    threads_before = torch.get_num_threads()
    hw = prepare_run(recipe.student.dtype, e.threads if e.threads is not None else threads_before,
                     where="student.dtype", announce=progress.bars)
    ordered = budget_order(conversations, e)
    journal = _journal(out_dir, recipe, ordered, order, backends)
    try:
        t_dev = time.perf_counter()
        dev_runs, dev_info = tuning_runs(recipe, order, conversations, backends, out_dir)
        runs, done, given_done, rounds = _run_rounds(recipe, ordered, order, backends, journal, out_dir, progress,
                                                     head_start_s=time.perf_counter() - t_dev)
        if e.max_minutes:
            material_info.update(time_budget={
                "max_minutes": e.max_minutes, "first_round": e.round_size, "rounds_run": rounds,
                "conversations_planned": len(conversations),
                "conversations_evaluated": len(done),   # no timing: material is fingerprinted
                **({"conversations_claim_level": given_done} if e.given_claims else {})}, **_counts(done))
            conversations = done
            if progress.on_system is not None:
                for name in order:
                    progress.on_system(runs[name])
    finally:
        journal.release()
        backends.release()
        torch.set_num_threads(threads_before)
    runs = {n: runs[n] for n in names}
    _write_records(out_dir / "records", runs)
    for name, dev in dev_runs.items():
        _write_jsonl(out_dir / "records" / f"{name}.tune_on.jsonl", dev.given_records)
    tuned = tuned_section(runs, dev_runs, dev_info, e.mcnemar) if dev_runs else None
    results = _results(recipe, names, material_info, runs, hw.threads.threads, conversations, tuned)
    results["wall_s"] = round(time.perf_counter() - t_start, 3)
    results["hardware"] = hw.to_dict()   # beside the timings, outside the fingerprint
    results["model_loads"] = dict(backends.loads)   # each in-process model once where both fit (ModelLoader)
    if compare:
        results["compare"] = compare_results(results, compare)
    _write_reports(out_dir, recipe, results, runs, conversations)
    journal.remove()   # the run folder holds it all now
    return EvalResult(out_dir, results, runs)


def _validated_systems(recipe: Recipe, systems: Sequence[str] | None) -> list[str]:
    """The systems to run (``systems``, else the recipe's), after checking the eval settings that name things."""
    e = recipe.eval
    if e.mcnemar not in MCNEMAR_VARIANTS:
        raise EvalError(f"eval.mcnemar must be one of {MCNEMAR_VARIANTS}, got {e.mcnemar!r}")
    if e.tune_on and not e.given_claims:
        raise EvalError("eval.tune_on tunes stage 2 on human claims: it needs eval.given_claims: true "
                        "(or eval.tune_on=[] to leave tuning out)")
    bad_rules = [r for r in e.rules if r not in RULES]
    if bad_rules or not e.rules:
        raise EvalError(f"eval.rules must list one or more of {', '.join(RULES)}, got {e.rules!r}")
    if e.evidence_conversations is not None and e.evidence_conversations < 1:
        raise EvalError(f"eval.evidence_conversations must be 1 or more (or null: all), got {e.evidence_conversations}")
    names = list(systems or e.systems)
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise EvalError(f"unknown system(s) {unknown}; valid: {', '.join(SYSTEMS)}")
    no_claim_level = [n for n in e.claim_level_only if n not in PIPELINE_SYSTEMS]
    if no_claim_level:
        raise EvalError(f"eval.claim_level_only: {no_claim_level} run no claim level (stages 2-3 on the human claims); "
                        f"systems that do: {', '.join(PIPELINE_SYSTEMS)}")
    not_pipelines = [n for n in e.attribution if n not in PIPELINE_SYSTEMS]
    if not_pipelines:
        raise EvalError(f"eval.attribution: {not_pipelines} run no VISTA pipeline whose stages could be replaced; "
                        f"systems that do: {', '.join(PIPELINE_SYSTEMS)}")
    return names


def _evaluated_material(recipe: Recipe, input_path: str | None, limit: int | None,
                        material: Material | None) -> tuple[list[Conversation], dict[str, Any]]:
    """The conversations to evaluate (held-out filter and ``limit`` applied) and results.json's material entry."""
    e = recipe.eval
    conversations, reports = load_test_material(recipe, input_path, material)
    train_ids, train_ids_source = student_training_ids(recipe)
    seen = [c.id for c in conversations if c.id in train_ids]
    if e.heldout_only:
        conversations = [c for c in conversations if c.id not in train_ids]
    if limit:
        conversations = conversations[:limit]
    if not conversations:
        raise EvalError("no conversations left to evaluate (check --input, --limit and eval.heldout_only)")
    return conversations, {
        "sources": reports, "input": input_path, "limit": limit, "heldout_only": e.heldout_only,
        **_counts(conversations),
        "student_training_overlap": {
            "checked_against": train_ids_source,
            "evaluated_conversations_in_student_training": len([c for c in conversations if c.id in train_ids]),
            "test_conversations_in_student_training": len(seen),
        },
    }


def _run_rounds(recipe: Recipe, ordered: list[Conversation], order: list[str], backends: ModelLoader, journal: Any,
                out_dir: Path, progress: EvalProgress,
                head_start_s: float = 0.0) -> tuple[dict[str, SystemRun], list[Conversation], int, int]:
    """Every system over ``ordered`` in rounds (one round without ``eval.max_minutes``), each system-round
    journalled as it ends and reused when the journal holds it; ``head_start_s``: what the budget has spent before
    (the dev split's runs). Returns the merged runs, the conversations run through the pipeline, how many ran with
    the human claims given, and the number of rounds."""
    e = recipe.eval
    saved = journal.open()
    spent_before = max((v["spent_s"] for v in saved.values()), default=0.0)   # of the run that was cut
    if saved:
        log.warning("eval: resuming from %s: %d system round(s) already run are reused", journal.path, len(saved))
    by_id = {c.id: c for c in ordered}
    probed = probed_conversations(ordered, e.evidence_conversations)
    t_systems = time.perf_counter()
    runs: dict[str, SystemRun] = {}
    done: list[Conversation] = []
    given_done = 0
    spent, rounds = spent_before, 0
    while len(done) < len(ordered):   # the claim level is never behind the pipeline (next_round)
        kept = [v for k, v in saved.items() if k.startswith(f"{rounds}:")]
        if kept:   # a round the cut run began: the same conversations again
            part = [by_id[i] for i in kept[0]["part"]]
            given = [by_id[i] for i in kept[0]["given"]]
        else:
            size, given_size = next_round(len(ordered), len(done), given_done, spent,
                                           sum(r.given_wall_s for r in runs.values()), e, head_start_s)
            if size < 1 and given_size < 1:
                log.warning("eval: time budget eval.max_minutes=%s: stopping after %d of %d conversations "
                            "(%d with the human claims given; %d rounds, %.1f min)", e.max_minutes, len(done),
                            len(ordered), given_done, rounds, spent / 60)
                break
            part = ordered[len(done):len(done) + size]
            given = ordered[given_done:given_done + given_size]
        for name in order:
            if name in runs and runs[name].status != "ok":
                continue
            own = [] if e.given_claims and name in e.claim_level_only else part
            if not own and not (e.given_claims and name in PIPELINE_SYSTEMS and given):
                continue   # nothing of its own this round (a claim-level-only system once the claims are all run)
            key = f"{rounds}:{name}"
            if key in saved:
                run = SystemRun(**saved[key]["run"])
            else:
                if name == "teacher" and not backends.both_fit():   # the loader sees to base and student
                    backends.release()
                log.info("eval: running %s on %d conversations%s%s", name, len(own),
                         f" ({len(given)} with the human claims given)" if e.given_claims and
                         len(given) != len(own) else "",
                         f" (round {rounds + 1}, time budget {e.max_minutes:g} min)" if e.max_minutes else "")
                run = run_system(name, recipe, own, backends, out_dir, progress.bars, given=given,
                                 reference_probes=probed)
                journal.append(key, {"part": [c.id for c in part], "given": [c.id for c in given],
                                     "spent_s": spent_before + time.perf_counter() - t_systems,
                                     "run": dataclasses.asdict(run)})
            runs[name] = merge_runs(runs[name], run, recipe) if name in runs else run
            if progress.on_system is not None and not e.max_minutes:
                progress.on_system(run)
        done += part
        given_done += len(given)
        rounds += 1
        spent = spent_before + time.perf_counter() - t_systems
    return runs, done, given_done, rounds


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _write_records(records_dir: Path, runs: dict[str, SystemRun]) -> None:
    """Each system's records, given-claims records and evidence-probe records as JSON lines."""
    records_dir.mkdir(parents=True, exist_ok=True)
    for name, run in runs.items():
        for suffix, rows in (("", run.records if run.status == "ok" else []), (".given_claims", run.given_records),
                             (".evidence", run.evidence_records)):
            if rows:
                _write_jsonl(records_dir / f"{name}{suffix}.jsonl", rows)
        if run.attribution_records:   # each row's records, named by what answered stages 1 and 3
            _write_jsonl(records_dir / f"{name}.attribution.jsonl",
                         [{"row": row, **r} for row, rs in run.attribution_records.items() for r in rs])


def _results(recipe: Recipe, names: list[str], material: dict[str, Any], runs: dict[str, SystemRun],
             threads: int, conversations: list[Conversation], tuned: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json's content up to its fingerprint: metrics, majority label, significance and intervals."""
    e = recipe.eval
    matcher = M.ClaimMatcher(threshold=e.match_threshold, use_embeddings=e.match_embeddings)
    metrics: dict[str, Any] = {}
    for name, run in runs.items():
        if run.status != "ok" or not run.records:   # not run, or claim level only (eval.claim_level_only)
            continue
        matches = M.match_records(run.records, matcher) if name != "llm_judge" else None
        metrics[name] = M.system_metrics(run.records, e.rules, matches, five_labels=name in FIVE_LABEL_SYSTEMS,
                                         n_bins=e.calibration_bins)
    common = add_common_coverage(metrics, runs, e.rules)
    any_records = next((r.records for r in runs.values() if r.status == "ok" and r.records), [])
    majority = {group: {"turn": M.majority_turn_metrics(rs), "claim": M.majority_claim_metrics(rs)}
                for group, rs in M.by_source(any_records).items()}
    results: dict[str, Any] = {
        "recipe": recipe.name, "recipe_path": recipe.path,
        "settings": {"rules": list(e.rules), "systems": names, "seed": e.seed, "bootstrap": e.bootstrap,
                     "mcnemar": e.mcnemar, "match_threshold": e.match_threshold,
                     "match_embeddings": e.match_embeddings, "calibration_bins": e.calibration_bins,
                     "batch_size": e.batch_size, "threads": threads,
                     "evidence_conversations": e.evidence_conversations},
        "material": material,
        "systems": {n: {**r.summary(), **({"evidence": evidence_metrics(r.evidence_records)}
                                          if r.evidence_records else {})} for n, r in runs.items()},
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
    world = M.world_section({n: r.records for n, r in runs.items() if r.status == "ok"}, e.seed)
    if world is not None:   # data with three-way labels (FHSumBench): the mixed-context study's metric
        results["world"] = world
    given = given_claims_section(runs, e.mcnemar, e.calibration_bins, e.rules)
    if given is not None:
        results["given_claims"] = given
    stages = stage_rules_section(runs, conversations, matcher, e.mcnemar)
    if stages is not None:
        results["stage_rules"] = stages
    attribution = _attribution(runs, e.rules, e.mcnemar)
    if attribution:
        results["attribution"] = attribution
    if tuned is not None:
        results["tuned"] = tuned
    results["fingerprint"] = fingerprint(results)
    return results


def _attribution(runs: dict[str, SystemRun], rules: Sequence[str], variant: str) -> dict[str, Any]:
    """results.json's ``attribution``: per pipeline system the turns its stage 1 left to the splitter (accuracy
    and coverage with and without them), and for the ``eval.attribution`` systems the rows of
    scoring/attribution.py under each turn rule."""
    from ..scoring.attribution import attribution_table, fallback_summary

    out: dict[str, Any] = {}
    for name, run in runs.items():
        if run.status != "ok" or not run.records or name not in PIPELINE_SYSTEMS:
            continue
        entry: dict[str, Any] = {"stage1_fallback": fallback_summary(run.records, rules)}
        if run.attribution_records:
            tables = {rule: attribution_table(run.attribution_records, rule, variant, system=name) for rule in rules}
            entry["rows"] = {rule: t for rule, t in tables.items() if t is not None}
        out[name] = entry
    return out


def _write_reports(out_dir: Path, recipe: Recipe, results: dict[str, Any], runs: dict[str, SystemRun],
                   conversations: list[Conversation]) -> None:
    """results.json, report.md and its plots, and report.html."""
    from ..scoring.page import EVIDENCE_HEADER, EVIDENCE_TITLE, eval_headline, evidence_rows, write_html
    from .report import write_report

    e = recipe.eval
    paths = write_report(out_dir, results)
    header, rows = eval_headline(results)
    ev = evidence_rows({n: s.get("evidence") for n, s in results["systems"].items()})
    write_html(out_dir / "report.html", f"vista-distill eval: {recipe.name}",
               {n: r.records for n, r in runs.items() if r.status == "ok"}, headline=(header, rows),
               plots=[paths[p] for p in ("accuracy.png", "confusion_stage3.png", "calibration.png") if p in paths],
               rules=list(e.rules), initial_background={c.id: list(c.background) for c in conversations},
               tables=[(EVIDENCE_TITLE, EVIDENCE_HEADER, ev)] if ev else [],
               notes=[(f"{results['material']['scored_turns']} scored turns; significance tests and every table: "
                       "report.md and results.json beside this page")])


__all__ = ["EvalProgress", "EvalResult", "load_test_material", "run_eval", "student_training_ids"]
