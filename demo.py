"""``vista-distill demo``: data -> teacher -> three adapters -> evaluation -> report, on a CPU.

Runs ``recipes/demo-cpu.yaml`` end to end (bundled FaithDial and Factcheck-GPT samples, their human
labels as teacher, LoRA students trained on CPU, student vs prompted base at claim and turn level) and
ends with a summary that points to the report. Every step resumes: the teacher's calls are cached and
training restarts from its last checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

from .runtime.numbers import number, pvalue

PACKAGE_ROOT = Path(__file__).resolve().parent
DEMO_RECIPE = PACKAGE_ROOT / "recipes" / "demo-cpu.yaml"
# with --max-minutes M, evaluation's share of M, set before training starts: training stops at its own share
EVAL_SHARE = 0.5
# the last evaluation round runs past the budget by up to about this (0.4-0.5 min on the 2-core Intel Xeon)
EVAL_OVERRUN_MINUTES = 0.5


def train_budget(recipe_minutes: float | None, demo_minutes: float | None, stages: int) -> float | None:
    """Minutes of training per stage under a demo budget: training's share of it split over the stages, at most the
    recipe's ``train.max_minutes``; the recipe's own when there is no demo budget."""
    if not demo_minutes:
        return recipe_minutes
    share = max(math.floor(demo_minutes * (1 - EVAL_SHARE) / max(stages, 1) * 100) / 100, 0.01)
    return share if recipe_minutes is None else min(recipe_minutes, share)


def eval_budget(recipe_minutes: float | None, demo_minutes: float | None, elapsed_s: float) -> float | None:
    """Minutes of evaluation under a demo budget: at least its share, set before training (training never spends
    it), more where the steps before it left more (less a last round's overrun); at most the recipe's
    ``eval.max_minutes``; None when neither sets one."""
    if not demo_minutes:
        return recipe_minutes
    left = math.floor((demo_minutes - elapsed_s / 60 - EVAL_OVERRUN_MINUTES) * 100) / 100
    minutes = max(left, math.floor(demo_minutes * EVAL_SHARE * 100) / 100, 0.01)
    return minutes if recipe_minutes is None else min(recipe_minutes, minutes)


def add_demo_subcommand(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the whole flow on the bundled sample: teacher, three adapters, evaluation",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher-url", help="OpenAI-compatible server for the teacher (default: embedded model)")
    p.add_argument("--teacher-model", help="teacher model name on that server (or a local path/hub id)")
    p.add_argument("--output-dir", default=None,
                   help="where silver data, adapters and the report go (default: the recipe's own folders, "
                        "runs/<recipe name>/, so `vista-distill eval --config <recipe>` finds what the demo made)")
    p.add_argument("--recipe", default=str(DEMO_RECIPE), help="recipe to run (default: recipes/demo-cpu.yaml)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="a time budget for the whole demo, which then trains fewer steps and evaluates fewer "
                        f"dialogues and says so: training {1 - EVAL_SHARE:.0%}% of it over the stages, evaluation "
                        f"at least {EVAL_SHARE:.0%}% (default: none, every step and every held-out dialogue)")
    p.add_argument("overrides", nargs="*", metavar="section.key=value", help="recipe overrides")
    p.set_defaults(func=run_demo)


def _step(n: int, title: str) -> float:
    print(f"[{n}/4] {title}", flush=True)
    return time.perf_counter()


def run_demo(args: argparse.Namespace) -> int:
    """The demo's four steps (data, distill, train, eval) and its closing summary."""
    from .runtime.hardware import prepare_run
    from .runtime.progress import log_to_file
    from .train.hf_configs import training_hardware

    recipe, out = _demo_recipe(args)
    log_path = log_to_file(out / "demo.log")   # the full log: library messages and warnings included
    # One decision for the whole demo (threads: before this process adds load of its own).
    hw = prepare_run(recipe.student.dtype, recipe.train.cpu_threads, where="student.dtype", announce=False)
    train_precision, train_hw = training_hardware(recipe)
    print(f"vista-distill demo: {hw.line()}", flush=True)
    started = time.perf_counter()
    times: dict[str, float] = {}

    t = _step(1, "data: bundled sample, split by dialogue into teacher material and held-out test material")
    from .data.material import load_material

    material = load_material(recipe)   # loaded and leak-checked once, for distill and eval
    print(f"      {len(material.train)} dialogues for the teacher, {len(material.test)} held out for evaluation "
          "(leak check passed)")
    times["data"] = time.perf_counter() - t

    teacher = ("the data's human labels (no model runs)" if recipe.teacher.backend == "labels" else
               f"{recipe.teacher.backend}:{recipe.teacher.model or 'embedded SmolLM2-135M'} "
               f"({recipe.teacher.prompt_style} prompts)")
    t = _step(2, f"distill: teacher {teacher} -> silver data per stage")
    from .distill.run import run_distill

    distilled = run_distill(recipe, progress=True, material=material)
    counts = distilled.manifest.get("counts", {})
    examples = ", ".join(f"{s} {((counts.get(s) or {}).get('train') or {}).get('examples', 0)}"
                         for s in ("stage1", "stage2", "stage3"))
    print(f"      silver data in {distilled.out_dir}: {examples} training examples")
    times["distill"] = time.perf_counter() - t

    t = _step(3, f"train: one LoRA adapter per stage on the student ({train_hw.capability.device}, weights "
                 f"{train_precision.model_dtype}, autocast {train_precision.compute_dtype}, "
                 f"{train_hw.threads.threads} thread(s))")
    from .train.run import train_stages

    recipe = _with_train_budget(recipe, args.max_minutes)
    trained = list(train_stages(recipe, "all"))
    for s in trained:
        print(f"      {s.get('stage')}: {_loss_line(s)}")
    times["train"] = time.perf_counter() - t

    budget = eval_budget(recipe.eval.max_minutes, args.max_minutes, time.perf_counter() - started)
    why = ", eval.max_minutes"
    if budget != recipe.eval.max_minutes:
        recipe = dataclasses.replace(recipe, eval=dataclasses.replace(recipe.eval, max_minutes=budget))
        why = f": evaluation's part of the demo's {args.max_minutes:g} (--max-minutes)"
    t = _step(4, f"eval: {' vs '.join(recipe.eval.systems)} on the held-out dialogues"
                 + (f" (time budget {budget:g} min{why})" if budget else ""))
    from .eval.run import EvalProgress, run_eval

    result = run_eval(recipe, material=material, progress=EvalProgress(bars=True))
    times["eval"] = time.perf_counter() - t

    total = time.perf_counter() - started
    summary = {"minutes": {k: round(v / 60, 2) for k, v in {**times, "total": total}.items()},
               "hardware": hw.to_dict(), "training": train_hw.to_dict(),
               "headline": _headline(result.results), "report": str(result.out_dir / "report.md"),
               "attribution": (result.results.get("attribution") or {}).get("student"),
               "budget": {"demo_max_minutes": args.max_minutes or None, "eval_max_minutes": budget},
               "evaluated": {k: result.results["material"].get(k) for k in ("conversations", "scored_turns",
                                                                              "time_budget")},
               **run_extent(trained, result.results, recipe)}
    from .data.io import atomic_write_text

    atomic_write_text(out / "demo_summary.json", json.dumps(summary, indent=2) + "\n")
    _print_closing(recipe, result, times, total, why, out, log_path, summary["cut"])
    return 0


def _with_train_budget(recipe: Any, demo_minutes: float | None) -> Any:
    """The recipe with each stage's ``max_minutes`` at most its share of the demo's budget (none: as it is)."""
    if not demo_minutes:
        return recipe
    stages = recipe.adapter_stages()
    per_stage = {k: dict(v) for k, v in recipe.train.per_stage.items()}
    for stage in stages:
        own = per_stage.get(stage, {}).get("max_minutes", recipe.train.max_minutes)
        per_stage.setdefault(stage, {})["max_minutes"] = train_budget(own, demo_minutes, len(stages))
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, per_stage=per_stage))


def run_extent(trained: list[dict], results: dict, recipe: Any) -> dict[str, Any]:
    """How much of the planned run ran: each stage's steps done and planned, the held-out dialogues evaluated
    (whole pipeline and claim level), the dev dialogues tuned on; ``cut`` lists what a time limit stopped short
    (empty: a full run, whose figures may be quoted as the demo's)."""
    steps = {}
    for s in trained:
        r = s.get("results") or {}
        steps[s.get("stage")] = {"done": r.get("global_step"),
                                 "planned": r.get("planned_steps", (s.get("time_budget") or {}).get("planned_steps"))}
    material = results.get("material") or {}
    budget = material.get("time_budget") or {}
    held_out = budget.get("conversations_planned", material.get("conversations"))
    dialogues = {"held_out": held_out,
                 "whole_pipeline": budget.get("conversations_evaluated", material.get("conversations")),
                 "claim_level": budget.get("conversations_claim_level",
                                           budget.get("conversations_evaluated", material.get("conversations")))}
    dev = ((results.get("tuned") or {}).get("dev") or {}).get("conversations")
    planned_dev = sum(src.n or 0 for src in recipe.eval.tune_on) or None
    cut = [f"{stage}: {v['done']} of {v['planned']} steps" for stage, v in steps.items()
           if v["done"] is not None and v["planned"] is not None and v["done"] < v["planned"]]
    where = {"whole_pipeline": "through the whole pipeline", "claim_level": "at claim level"}
    cut += [f"{dialogues[k]} of {held_out} held-out dialogues {w}" for k, w in where.items()
            if held_out is not None and dialogues[k] is not None and dialogues[k] < held_out]
    return {"steps": steps, "dialogues": dialogues, "tuned_on": {"dev_dialogues": dev, "planned": planned_dev},
            "cut": cut, "full_run": not cut}


def _demo_recipe(args: argparse.Namespace) -> tuple[Any, Path]:
    """The recipe with the command line's overrides, and the demo's output folder."""
    from .config import load_recipe

    overrides = []
    if args.output_dir:
        out = Path(args.output_dir)
        overrides = [f"distill.output_dir={out / 'silver'}", f"train.output_dir={out / 'checkpoints'}",
                     f"eval.output_dir={out / 'eval'}"]
    if args.teacher_url:
        overrides += ["teacher.backend=openai", f"teacher.base_url={args.teacher_url}"]
    if args.teacher_model:
        overrides.append(f"teacher.model={args.teacher_model}")
    recipe = load_recipe(args.recipe, overrides + list(args.overrides))
    if not args.output_dir:
        out = Path(recipe.resolve(recipe.train.output_dir)).parent
    return recipe, out


def _print_closing(recipe: Any, result: Any, times: dict[str, float], total: float, why: str, out: Path,
                   log_path: Path, short: list[str]) -> None:
    """The closing summary: minutes per step, what the time budget cut, where everything is, and
    the tables of every system's accuracy with the student's McNemar tests."""
    from .runtime.progress import console

    term = console(stderr=False)
    term.rule()
    term.print(f"demo finished in {total / 60:.1f} min "
               f"({', '.join(f'{k} {v / 60:.1f}' for k, v in times.items())} min)")
    cut = result.results["material"].get("time_budget")
    if cut and cut["conversations_evaluated"] < cut["conversations_planned"]:
        claims = cut.get("conversations_claim_level", cut["conversations_evaluated"])
        term.print(f"[yellow]eval:      the time budget ({cut['max_minutes']:g} min{why}) let "
                   f"{cut['conversations_evaluated']} of {cut['conversations_planned']} held-out dialogues run "
                   f"through the whole pipeline on this CPU (seeded order; a first round of {cut['first_round']} "
                   f"measured the pace): the turn numbers below are over those; the claim level and the evidence "
                   f"probes (human claims given, cheaper) covered {claims}[/]")
    if short:
        term.print(f"[yellow]cut:       a time limit stopped this run short ({'; '.join(short)}): its figures are not "
                   "the demo's; without --max-minutes or max_minutes every step and dialogue runs[/]")
    term.print(f"adapters:  {Path(recipe.resolve(recipe.train.output_dir))}  (vista-distill score --adapters ...)")
    term.print(f"plots:     {', '.join(str(p) for p in sorted(result.out_dir.glob('*.png')))}")
    term.print(f"summary:   {out / 'demo_summary.json'}")
    term.print(f"log:       {log_path}")
    term.print(f"page:      {result.out_dir / 'report.html'}  (every turn, with filters)")
    for table in _summary_tables(result.results):
        term.print(table)
    term.print(f"report:    {result.out_dir / 'report.md'}")


def _student_tests(results: dict) -> list[tuple[str, str, float, int, float | None]]:
    """(level, other system, student's accuracy minus the other's, n, McNemar p) for the student against every
    other system: claims (stage 2, human claims) and turns under each rule; then each stage against its rule
    (eval/stage_rules.py; stage 1: claim F1, no paired test)."""
    from .eval.stage_rules import stage_rule_rows
    from .scoring.metrics import OVERALL

    rules = results.get("settings", {}).get("rules") or ["safe", "strict"]
    levels = [
        ("claims (stage 2)", (results.get("given_claims") or {}).get("significance", {}).get("stage2", {})),
        *((f"turns ({rule})", results.get("significance", {}).get("by_rule", {}).get(rule, {})) for rule in rules),
    ]
    out = []
    for label, pairs in levels:
        for p in pairs.get(OVERALL, []):
            if "student" in (p["system_1"], p["system_2"]):
                other = p["system_2"] if p["system_1"] == "student" else p["system_1"]
                delta = (p.get("delta") or 0) * (1 if p["system_1"] == "student" else -1)
                out.append((label, other, delta, p["n"], p["pvalue"]))
    for p in (results.get("tuned") or {}).get("student_vs_tuned") or []:
        out.append(("claims, both tuned", p["system_2"], p["delta"] or 0, p["n"], p["pvalue"]))
    for stage, name, n, mine, rule, p in stage_rule_rows(results.get("stage_rules")):
        if name == "student" and mine is not None and rule is not None:
            out.append((f"stage {stage}", _STAGE_RULE[stage[0]], mine - rule, n, p))
    return out


_STAGE_RULE = {"1": "splitter", "2": "overlap rule", "3": "wording rule"}


def _system_rows(results: dict) -> list[tuple[str, list[str], str]]:
    """(system, [turn accuracy per rule..., claim accuracy (stage 2)], speed or why it did not run)."""
    from .scoring.metrics import OVERALL

    rules = results.get("settings", {}).get("rules") or ["safe", "strict"]
    given = (results.get("given_claims") or {}).get("systems", {})
    rows = []
    for name, sysres in (results.get("systems") or {}).items():
        if sysres.get("status") != "ok":
            rows.append((name, ["-"] * (len(rules) + 1), f"{sysres.get('status')}: {sysres.get('reason')}"))
            continue
        claims = (given.get(name) or {}).get(OVERALL) or {}
        if name not in (results.get("metrics") or {}):   # eval.claim_level_only left it out: no turns of its own
            rows.append((name, ["-"] * len(rules) + [_num(claims.get("binary_accuracy"))], "claim level only"))
            continue
        turn = results["metrics"][name].get(OVERALL, {}).get("turn") or {}
        eff = sysres.get("efficiency") or {}
        speed = f"{eff.get('turns_per_s') or 0:.2f}" + (f" ({eff['cache_hit_share']:.0%} from the call cache)"
                                                        if eff.get("cache_hit_share") else "")
        rows.append((name, [*(_num(turn.get(r, {}).get("accuracy")) for r in rules),
                            _num(claims.get("binary_accuracy"))], speed))
        parts = ((results.get("given_claims") or {}).get("parts") or {}).get(name)
        if name == "student" and parts and parts["head_applied"]:   # where the accuracy comes from
            rows.append(("  adapter, no head", ["-"] * len(rules) + [_num(parts["adapter_alone"])], ""))
    return rows


def _summary_tables(results: dict) -> list:
    """The closing tables: each system's accuracy (turns under each turn rule, claims at stage 2, speed), the cheap
    baselines (majority, overlap, pmi) among them; the student against every other system with McNemar p-values; and
    whether each reads its evidence."""
    from .runtime.progress import make_table
    from .scoring.terminal import evidence_table

    rules = results.get("settings", {}).get("rules") or ["safe", "strict"]
    tuned = {n: _num(t.get("tuned")) for n, t in ((results.get("tuned") or {}).get("systems") or {}).items()}
    systems = make_table("held-out dialogues: accuracy",
                         ["system", *(f"turns\n{r}" for r in rules),
                          "claims (stage 2)\nfixed (tuned)" if tuned else "claims\n(stage 2)", "turns/s"],
                         [[name, *cells[:-1], cells[-1] + (f" ({tuned[name]})" if name in tuned else ""), speed]
                          for name, cells, speed in _system_rows(results)],
                         max_width={len(rules) + 2: 35})  # "12345.67 (100% from the call cache)" on one line
    tests = make_table(
        "student - other system or stage rule (McNemar, exact)",
        ["level", "other", "accuracy\ndifference", "n", "p"],
        [
            [label, other, f"{delta:+.3f}", n, pvalue(p, 2, missing="-")]
            for label, other, delta, n, p in _student_tests(results)
        ],
    )
    evidence = evidence_table({n: s.get("evidence") for n, s in (results.get("systems") or {}).items()})
    return [systems] + ([tests] if tests.row_count else []) + _attribution_tables(results) + \
        ([evidence] if evidence is not None else [])


def _attribution_tables(results: dict) -> list:
    """The student's turns stage by stage under the first turn rule (scoring/attribution.py)."""
    from .runtime.progress import make_table
    from .scoring.attribution import ROW_HEADER, attribution_rows

    rules = results.get("settings", {}).get("rules") or ["safe"]
    table = (((results.get("attribution") or {}).get("student") or {}).get("rows") or {}).get(rules[0])
    if not table:
        return []
    return [make_table(f"where the student loses its turns ({table['turns']} turns, {rules[0]} rule, %; McNemar vs the "
                       "row above)", ROW_HEADER, attribution_rows(table))]


def _loss_line(summary: dict) -> str:
    r = summary.get("results") or {}
    parts = [f"{r['global_step']} steps on {summary.get('silver', {}).get('train_examples')} examples"]
    if r.get("first_eval_loss") is not None:
        parts.append(f"eval loss {r['first_eval_loss']:.3f} (step {r['first_eval_step']}) -> "
                     f"{r['final_eval_loss']:.3f} (step {r['final_eval_step']})")
    return ", ".join(parts)


def _headline(results: dict) -> list[str]:
    """Per system: turn accuracy under each rule and claim accuracy on the human claims, the edit probe and the
    overlap-disagreement strata; then the student against every other system with McNemar p-values."""
    rules = results.get("settings", {}).get("rules") or ["safe", "strict"]
    lines = []
    for name, cells, speed in _system_rows(results):
        sysres = results["systems"].get(name)
        if sysres is None:   # a part of the student's row
            lines.append(f"{name.strip()}: claims (stage 2) {cells[-1]}")
            continue
        if sysres.get("status") != "ok":
            lines.append(f"{name:8s} {speed}")
            continue
        parts = [f"turn accuracy {rule} {v}" for rule, v in zip(rules, cells) if v != "-"] + \
            [f"claims (stage 2) {cells[-1]}"]
        ev = sysres.get("evidence") or {}
        if ev:
            strata = ev.get("strata") or {}
            parts += [f"edit flip rate {_num(ev.get('edit_flip_rate'))}",
                      f"VERIFIED low overlap {_num((strata.get('verified_low_overlap') or {}).get('accuracy'))}",
                      f"unverifiable high overlap "
                      f"{_num((strata.get('unverifiable_high_overlap') or {}).get('accuracy'))}",
                      f"deletion flip rate {_num(ev.get('deletion_flip_rate'))}",
                      f"own vs foreign reference AUC {_num(ev.get('foreign_reference_auc'))}"]
        lines.append(f"{name:8s} " + ", ".join(parts) + (f", {speed} turns/s" if cells[0] != "-" else f", {speed}"))
    for name, t in ((results.get("tuned") or {}).get("systems") or {}).items():
        if "tuned" in t:
            lines.append(f"{name:8s} claims (stage 2) fixed {_num(t['fixed'])}, tuned {_num(t['tuned'])} at cut-off "
                         f"{t['threshold']:.2f} (chosen on the dev split), McNemar p = {t['pvalue']:.2g}")
    for label, other, delta, n, p in _student_tests(results):
        lines.append(f"student - {other}, {label}: {delta:+.3f} over {n}"
                     + ("" if p is None else f", McNemar p = {p:.2g}"))
    return lines


def _num(x: float | None) -> str:
    return number(x, 3, missing="n/a")
