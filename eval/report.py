"""The run folder: ``results.json`` (everything), ``report.md`` and the PNG plots of :mod:`.plots`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.io import atomic_write_text
from ..scoring.metrics import OVERALL
from ..scoring.significance import significance_mark
from .plots import PLOTS, plot_accuracy, plot_calibration, plot_confusion
from .report_format import _common, _number, _percent, _pvalue, markdown_table
from .results import (
    Calibration,
    ClaimMatching,
    ClaimMetrics,
    MajorityClaim,
    MajorityTurn,
    Results,
    SystemEntry,
    TurnMetrics,
)

RULE_TEXT = {   # how each turn rule of engine.SAFE_CATEGORIES judges a turn (README "Turn rules")
    "safe": "VERIFIED, OUT-OF-SCOPE, ABSTENTION are safe; no claims or an unparseable category -> unknown",
    "strict": "only VERIFIED is safe (the paper's Table 1 text); unknown as for `safe`",
    "authors": "the authors' released evaluation: safe as `safe`, but a claim with no stage 2 label is dropped "
               "and a turn with no claims (left) is faithful; an unparseable stage 3 category -> unknown",
}


# -- markdown ------------------------------------------------------------------------------------------

def _given_claims_markdown(results: Results) -> list[str]:
    """Stages 2-3 on the human claims (eval.given_claims): accuracy per benchmark and McNemar per pair."""
    given = results.given_claims
    if not given:
        return []
    systems = given.systems
    names = list(systems)
    groups = [g for g in next(iter(systems.values())) if g != OVERALL] + [OVERALL]
    out = ["## Claim level, human claims given (stages 2 and 3)", "",
           "Each system labels the human claims of every test turn (no stage 1): `stage 2` is VERIFIED vs "
           "not, `category` the five labels. McNemar pairs the same claims.", ""]
    rows = []
    for g in groups:
        maj = results.majority_of(g).claim or MajorityClaim()
        row = [g, str((systems[names[0]].get(g) or ClaimMetrics()).n_labelled_matches) or "–"]
        for n in names:
            c = systems[n].get(g) or ClaimMetrics()
            row.append(f"{_percent(c.binary_accuracy)} / {_percent(c.accuracy)} / {_percent(c.macro_f1)}")
        row.append(f"{_percent(maj.binary_accuracy)} ({_dash(maj.binary_label)}) / "
                   f"{_percent(maj.accuracy)} ({_dash(maj.label)})")
        rows.append(row)
    out += [markdown_table(["benchmark", "claims", *[f"{n}: stage 2 / category / macro-F1" for n in names],
                            "majority of the test labels: stage 2 / category"], rows), ""]
    turns = given.turns or {}
    rules = results.settings.rules
    if turns:
        out += ["Turn verdicts from the human claims (each system's own labels of them, under each rule):", "",
                markdown_table(["system", *(f"turn accuracy {r}" for r in rules), "gold turns"],
                               [[n, *(_percent((turns[n].get(r) or TurnMetrics()).accuracy) for r in rules),
                                 next(((turns[n].get(r) or TurnMetrics()).n_gold for r in rules), "–")]
                                for n in turns]),
                ""]
    parts = given.parts or {}
    if parts:
        out += ["Stage 2 part by part (human claims with the evidence signals; backends/evidence_head.py): the adapter "
                "alone (its label margin > 0), as labelled (with the evidence head where one was applied), and the "
                "overlap rule on the same claims:", "",
                markdown_table(["system", "claims", "head applied", "adapter alone", "as labelled", "overlap rule"],
                               [[n, p.claims, p.head_applied, _percent(p.adapter_alone),
                                 _percent(p.as_labelled), _percent(p.overlap_rule)] for n, p in parts.items()]),
                ""]
    rows = []
    for level in ("stage2", "category"):
        for g in groups:
            for p in given.significance[level].get(g, []):
                rows.append([level, g, f"{p.system_1} − {p.system_2}", p.n, _percent(p.delta),
                             _pvalue(p.pvalue), p.mark, f"b={p.b}, c={p.c}"])
    if rows:
        out += [markdown_table(["level", "benchmark", "pair", "claims", "Δ acc", "p", "sig.", "discordant (b, c)"],
                               rows), ""]
    return out


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _dash(value: Any) -> Any:
    """A missing value as report.md prints it."""
    return _or(value, "–")


def _evidence_markdown(results: Results) -> list[str]:
    """The evidence probes of each system (scoring/evidence.py)."""
    from ..scoring.page import EVIDENCE_HEADER, EVIDENCE_TITLE, evidence_rows

    rows = evidence_rows({n: s.evidence.to_dict() if s.evidence is not None else None
                         for n, s in (results.systems or {}).items()})
    if not rows:
        return []
    return [f"## {EVIDENCE_TITLE}", "",
            "Each system's own stage 2 request with only its reference changed. Edit flip rate: of the human-VERIFIED "
            "claims, the share called UNVERIFIABLE once the sentence holding most of their words is changed to "
            "contradict them (a number, date, name or a negation; most words stay), with the AUC of P(VERIFIED) own "
            "against edited. Low / high overlap: stage 2 accuracy on the human-VERIFIED claims whose reference holds "
            "under half of their content words, and on the unverifiable claims whose reference holds at least half "
            "(the overlap rule is wrong on all of them). These the overlap rule cannot pass; the next three it "
            "passes by construction. Deletion flip rate: of the claims it "
            "calls VERIFIED, the share it calls UNVERIFIABLE once the sentences that support them (token overlap) are "
            "removed. Own vs foreign AUC: P(VERIFIED) of the human-VERIFIED claims with their own reference ranked "
            "against another turn's (0.5: the reference makes no difference). Claim-only: the claims with an empty "
            "reference, beside their accuracy with it. (`results.json`: `systems.<name>.evidence`; records: "
            "`records/<name>.evidence.jsonl`.)" + _probe_scope(results), "", markdown_table(EVIDENCE_HEADER, rows), ""]


def _probe_scope(results: Results) -> str:
    """Where the whole-reference probes ran on part of the claims (``eval.evidence_conversations``), which part."""
    n = results.settings.evidence_conversations if results.settings else None
    return "" if n is None else (f" The deletion, foreign and edit probes ran on the claims of {n} conversations "
                                 "spread evenly over the evaluation's order (`eval.evidence_conversations`); "
                                 "claim-only and the low / high overlap strata on every claim.")


def _world_markdown(results: Results) -> list[str]:
    """Three-way verdicts (world-knowledge stage, the study's judge) beside the published rows."""
    w = results.world
    if not w:
        return []
    rows = [[name, _number(m.macro_precision), _number(m.macro_recall), _number(m.macro_f1),
             *(_number(x) for x in m.label_accuracy.values()), m.unknown, m.n]
            for name, m in w.systems.items()]
    rows += [[f"published: {name}", "", "", _number(f1), "", "", "", "", ""]
             for name, f1 in w.published_macro_f1.items()]
    out = ["## Three-way verdicts: faithful, factual, non-factual hallucination", "",
           "The mixed-context study's metric (macro precision, recall and F1 over the three labels; an unknown "
           f"verdict counts as wrong). {w.note}.", "",
           markdown_table(["system", "macro P", "macro R", "macro F1", "acc faithful", "acc factual",
                           "acc non-factual", "unknown", "turns"], rows), ""]
    for name, m in w.systems.items():
        c = m.confusion
        out += [f"Confusion, {name} (rows gold, columns predicted):", "",
                markdown_table(["gold \\ predicted", *c["columns (predicted)"]],
                               [[g, *row] for g, row in zip(c["rows (gold)"], c["matrix"])]), ""]
    return out


def _header_markdown(results: Results) -> list[str]:
    """Title, material, time budget, training overlap and the rules."""
    rules = results.settings.rules
    mat = results.material
    out = [f"# Evaluation: {results.recipe}", ""]
    src = mat.input or ", ".join(s["source"] for s in mat.sources if "source" in s)   # not data.leaks' notes
    out.append(f"Material: `{src}` — {mat.conversations} conversations, {mat.scored_turns} scored turns "
               f"({mat.gold_turns} with a gold label), {mat.human_claims} human claims"
               + (f"; first {mat.limit} conversations only (--limit)" if mat.limit else "") + ".")
    moved = sum((s.get("split") or {}).get("moved_to_train", 0) for s in mat.sources)
    if moved:
        out.append(f"\n{moved} conversation(s) of the held-out share moved to the training side: their reference is "
                   "also one of a training conversation (`data.split_by: reference`).")
    budget = mat.time_budget
    if budget and budget.conversations_evaluated < budget.conversations_planned:
        claims = _or(budget.conversations_claim_level, budget.conversations_evaluated)
        out.append(f"\n**Time budget:** `eval.max_minutes` {budget.max_minutes:g} let "
                   f"{budget.conversations_evaluated} of the {budget.conversations_planned} conversations run "
                   "(a random sample, seeded order); every turn-level number below is over those"
                   + (f"; the claim level with the human claims given and the evidence probes covered {claims}."
                      if claims != budget.conversations_evaluated else "."))
    ov = mat.student_training_overlap
    if ov.evaluated_conversations_in_student_training:
        out.append(f"\n**Caution:** {ov.evaluated_conversations_in_student_training} of the evaluated "
                   f"conversations are in the student's silver training split ({ov.checked_against}): the "
                   "student's numbers on them are not held-out (set `eval.heldout_only=true` to drop them).")
    described = [f"`{r}`: {RULE_TEXT[r]}" for r in rules if r in RULE_TEXT]
    common = results.common_systems()
    out += ["", f"Rules: {', '.join(rules)} ({'; '.join(described)}). Turn accuracy is over each system's own "
            "turns with a verdict (coverage beside it); `acc common` is over the gold turns that every system that "
            f"ran ({', '.join(common) or 'none'}) gave a verdict, so systems compare on the same turns (their "
            "number beside it); `acc_all` counts an `unknown` verdict as wrong and is what the "
            "paired tests compare. Significance: " + results.significance.test
            + "; marks * p<.05, ** p<.01, *** p<.001, ns otherwise. Intervals: "
            f"{results.settings.bootstrap} seeded bootstrap resamples (seed {results.settings.seed}).", ""]
    return out


def _systems_markdown(results: Results) -> list[str]:
    """Each system: status and what it is."""
    out: list[str] = []
    out += ["## Systems", ""]
    rows = []
    for name, s in results.systems.items():
        d = s.description
        what = ", ".join(f"{k} {getattr(d, k)}" for k in ("backend", "prompts", "baseline") if getattr(d, k))
        if d.adapters:
            what += ", adapters " + ", ".join(sorted(d.adapters))
        if d.judge_parsed_from:
            what += ", answers read from " + ", ".join(f"{k} {v}" for k, v in d.judge_parsed_from.items())
        rows.append([name, s.status, s.reason or what or "–"])
    out += [markdown_table(["system", "status", "details / reason"], rows), ""]
    notes = [f"- {n}: {s.description.note}" for n, s in results.systems.items() if s.description.note]
    out += notes + ([""] if notes else [])
    return out


def _turn_markdown(results: Results) -> list[str]:
    """Turn-level headline metrics, one table per rule."""
    rules = results.settings.rules
    ok = results.ok_systems()
    out: list[str] = []
    out += ["## Turn level, all benchmarks", ""]
    header = ["system", "acc [95% CI]", "coverage", "acc common (turns)", "acc_all", "bal. acc",
              "P / R / F1 (halluc.)", "macro-F1"]
    maj = results.majority_of(OVERALL).turn or MajorityTurn()
    for rule in rules:
        rows = []
        for name in ok:
            t = results.metrics[name][OVERALL].turn[rule]
            ci = results.bootstrap[name][rule][OVERALL]["accuracy"]
            rows.append([name, f"{_percent(t.accuracy)} [{_percent(ci.low)}, {_percent(ci.high)}]",
                         _percent(t.coverage), _common(t), _percent(t.accuracy_all), _percent(t.balanced_accuracy),
                         f"{_percent(t.precision)} / {_percent(t.recall)} / {_percent(t.f1)}",
                         _percent(t.macro_f1)])
        if maj.accuracy is not None:
            acc = _percent(maj.accuracy)
            rows.append([f"majority ({maj.label})", acc, "100.0", "–", acc, "50.0", "–", "–"])
        out += [f"Rule `{rule}`:", "", markdown_table(header, rows), ""]
    return out


def _teacher_student_markdown(results: Results) -> list[str]:
    """Teacher against student per benchmark, with McNemar."""
    rules = results.settings.rules
    ok = results.ok_systems()
    out: list[str] = []
    out += ["## Teacher vs student, per benchmark", ""]
    if "teacher" in ok and "student" in ok:
        for rule in rules:
            rows = []
            for g in results.benchmark_groups():
                st, te = results.turn("student", g, rule), results.turn("teacher", g, rule)
                p = results.pair(rule, g, "student", "teacher")
                rows.append([g, st.n_gold, _percent(st.accuracy), _common(st), _percent(st.accuracy_all),
                             _percent(te.accuracy), _common(te), _percent(te.accuracy_all),
                             _percent(p and p.delta), _pvalue(p and p.pvalue), p.mark if p else "",
                             f"b={p.b}, c={p.c}" if p else "–"])
            out += [f"Rule `{rule}`:", "",
                    markdown_table(["benchmark", "gold turns", "student acc", "student acc common (turns)",
                                    "student acc_all", "teacher acc", "teacher acc common (turns)", "teacher acc_all",
                                    "Δ acc_all (student − teacher)", "p", "sig.", "discordant"], rows), ""]
    else:
        missing = [n for n in ("student", "teacher") if n not in ok]
        why = [f"{n} {results.systems[n].status} (see Systems)" if n in results.systems
               else f"{n} not in eval.systems" for n in missing]
        out += [f"Not available: {'; '.join(why)}.", ""]
    return out


def _per_benchmark_markdown(results: Results) -> list[str]:
    """Every system per benchmark, marked against the reference system."""
    rules = results.settings.rules
    ok = results.ok_systems()
    out: list[str] = []
    ref = "student" if "student" in ok else (ok[0] if ok else None)
    out += [f"## Accuracy per benchmark (all systems; marks: McNemar vs {ref})", ""]
    for rule in rules:
        rows = []
        for g in results.benchmark_groups():
            row = [g]
            for name in ok:
                t = results.turn(name, g, rule)
                mark = ""
                if ref and name != ref:
                    p = results.pair(rule, g, ref, name)
                    mark = f" {p.mark}" if p else ""
                row.append(f"{_percent(t.accuracy)} ({_percent(t.coverage)}); common "
                           f"{_percent(t.accuracy_common)}{mark}")
            rows.append([*row, _dash(results.common_group(rule, g).n)])
        out += [f"Rule `{rule}` — accuracy (coverage); common: accuracy on the turns every system covered:", "",
                markdown_table(["benchmark", *ok, "common turns"], rows), ""]
    return out


def _claim_row(name: str, c: ClaimMetrics | None, t: TurnMetrics) -> list[Any]:
    """One system's row of the claim-level table."""
    if not c:
        return [name, _percent(t.accuracy), _common(t)] + ["–"] * 9
    cal = c.stage2_calibration or Calibration()
    return [name, _percent(t.accuracy), _common(t), _percent(c.accuracy), _percent(c.macro_f1),
            _percent(c.binary_accuracy), f"{c.matched}/{c.human_claims} ({c.matched_exact} exact)",
            _percent(c.set_f1), _percent(c.set_jaccard), _number(cal.roc_auc), _number(cal.ece), _number(cal.brier)]


def _claim_markdown(results: Results) -> list[str]:
    """Claim level on the human claims (the paper's Table 5), overall and per benchmark."""
    rules = results.settings.rules
    ok = results.ok_systems()
    out: list[str] = []
    rule0 = rules[0]
    out += ["## Claim level (human claims; cf. the paper's Table 5)", "",
            (f"Matching: {(results.claim_matching or ClaimMatching()).method}. Claim accuracy and macro-F1 are over "
             "the five labels on matched claims; `binary` is VERIFIED vs not; set F1 / Jaccard compare the predicted "
             "and human claim sets; AUC / ECE / Brier are from stage 2 P(VERIFIED) on matched claims."), ""]
    rows = [_claim_row(name, results.metrics[name][OVERALL].claim, results.metrics[name][OVERALL].turn[rule0])
            for name in ok]
    mc = results.majority_of(OVERALL).claim
    if mc:
        rows.append([f"majority ({mc.label})", "–", "–", _percent(mc.accuracy), _percent(mc.macro_f1)] + ["–"] * 7)
    out += [markdown_table(["system", f"turn acc ({rule0})", "turn acc common (turns)", "claim acc", "macro-F1",
                            "binary acc", "matched", "set F1", "Jaccard", "AUC", "ECE", "Brier"], rows), ""]
    # per benchmark claim accuracy
    rows = []
    for g in results.benchmark_groups():
        row = [g]
        for name in ok:
            c = results.group(name, g).claim or ClaimMetrics()
            row.append(f"{_percent(c.accuracy)} / {_percent(c.macro_f1)}" if c.accuracy is not None
                       else _percent(c.binary_accuracy) + (" (binary)" if c.binary_accuracy is not None else ""))
        rows.append(row)
    out += ["Claim accuracy / macro-F1 per benchmark:", "", markdown_table(["benchmark", *ok], rows), ""]
    return out


def _significance_markdown(results: Results) -> list[str]:
    """McNemar over all pairs of systems, overall."""
    out: list[str] = []
    out += ["## McNemar, all pairs (all benchmarks)", ""]
    for rule in results.settings.rules:
        rows = [[f"{p.system_1} − {p.system_2}", p.n, _percent(p.delta), _pvalue(p.pvalue), p.mark,
                 f"b={p.b}, c={p.c}"] for p in results.pairs(rule, OVERALL)]
        out += [f"Rule `{rule}`:", "",
                markdown_table(["pair", "turns", "Δ acc_all", "p", "sig.", "discordant (b, c)"], rows)
                if rows else "(fewer than two systems ran)", ""]
    return out


def _speed_row(name: str, s: SystemEntry) -> list[Any]:
    """One system's row of the speed and cost table."""
    if s.status != "ok":
        return [name, s.status] + ["–"] * 7
    e = s.efficiency
    cost, cached = e.cost_per_1k_turns, e.cache_hit_share
    speed = _number(e.turns_per_s, 3) + (f" ({cached:.0%} cached)" if cached else "")
    return [name, _number(e.wall_s, 1), speed, _number(e.prompt_tokens), _number(e.completion_tokens),
            _number(e.peak_rss_mb, 0), _number(e.cuda_max_memory_allocated_mb, 0), _number(s.description.load_s, 1),
            f"${cost['usd']:.4f}" if cost else "no price configured"]


def _speed_markdown(results: Results) -> list[str]:
    """Speed, memory and cost per system, and the hardware."""
    out: list[str] = []
    out += ["## Speed and cost", ""]
    rows = [_speed_row(name, s) for name, s in results.systems.items()]
    out += [markdown_table(["system", "wall s", "turns/s", "prompt tokens", "generated tokens", "peak RSS MB",
                    "CUDA peak MB", "model load s", "cost / 1k turns"], rows), "",
            ("Peak RSS is the whole process's (models loaded earlier stay counted); the base model is loaded once "
             "for base, llm_judge and factscore. \"cached\": share of the teacher's calls answered from its call "
             "cache, so that speed is not the teacher's."), ""]
    hw = results.hardware
    if hw:
        out += [(f"Measured on {hw.device}: {hw.device_name} (torch {hw.torch}), local models in "
                 f"{hw.dtype} ({hw.dtype_reason}), {hw.threads} thread(s) ({hw.threads_reason})."), ""]
    return out


def _reproducibility_markdown(results: Results, plots: Sequence[str]) -> list[str]:
    """Fingerprint, comparison with a previous run, and the plots."""
    out: list[str] = []
    out += ["## Reproducibility", "",
            (f"Fingerprint of metrics, tests and intervals: `{results.fingerprint}` "
             f"(seed {results.settings.seed}); total wall time {results.wall_s:.0f} s.")]
    cmp = results.compare
    if cmp:
        out.append(f"Compared with `{cmp.previous}`: " + ("identical." if cmp.identical else
                   "DIFFERENT: " + "; ".join(cmp.differences[:10])))
    out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return out


def render_markdown(results: Results | dict[str, Any], plots: Sequence[str]) -> str:
    """report.md: its sections in order (``results`` typed or as ``results.json`` holds it)."""
    from .stage_rules import attribution_markdown, stage_rules_markdown
    from .tuning import tuned_markdown
    typed = Results.of(results)
    sections = [_header_markdown(typed), _systems_markdown(typed), _turn_markdown(typed),
                _teacher_student_markdown(typed), _per_benchmark_markdown(typed), _claim_markdown(typed),
                _given_claims_markdown(typed), stage_rules_markdown(typed), attribution_markdown(typed),
                tuned_markdown(typed),
                _evidence_markdown(typed), _world_markdown(typed), _significance_markdown(typed),
                _speed_markdown(typed), _reproducibility_markdown(typed, plots)]
    return "\n".join(line for section in sections for line in section)


def write_report(out_dir: str | Path, results: dict[str, Any]) -> dict[str, Path]:
    """Write ``results.json``, the three plots and ``report.md`` into ``out_dir``; return their paths. ``results``
    (the dict ``run_eval`` built) gets its ``plots``; the file is that dict, the report and plots read it typed."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {p: out / p for p in PLOTS}
    typed = Results.of(results)
    plot_accuracy(typed, paths["accuracy.png"])
    plot_confusion(typed, paths["confusion_stage3.png"])
    plot_calibration(typed, paths["calibration.png"])
    results["plots"] = list(PLOTS)
    typed.plots = list(PLOTS)
    paths["results.json"] = out / "results.json"
    atomic_write_text(paths["results.json"], json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    paths["report.md"] = out / "report.md"
    atomic_write_text(paths["report.md"], render_markdown(typed, PLOTS))
    return paths


__all__ = [
    "PLOTS",
    "plot_accuracy",
    "plot_calibration",
    "plot_confusion",
    "render_markdown",
    "significance_mark",
    "write_report",
]
