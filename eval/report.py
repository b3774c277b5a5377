"""The run folder: ``results.json`` (everything), ``report.md`` and the PNG plots of :mod:`.plots`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.io import atomic_write_text
from ..scoring.metrics import OVERALL
from ..scoring.significance import significance_mark
from .plots import PLOTS, benchmark_groups, ok_systems, plot_accuracy, plot_calibration, plot_confusion
from .report_format import _common, _number, _percent, _pvalue, markdown_table

RULE_TEXT = {   # how each turn rule of engine.SAFE_CATEGORIES judges a turn (README "Turn rules")
    "safe": "VERIFIED, OUT-OF-SCOPE, ABSTENTION are safe; no claims or an unparseable category -> unknown",
    "strict": "only VERIFIED is safe (the paper's Table 1 text); unknown as for `safe`",
    "authors": "the authors' released evaluation: safe as `safe`, but a claim with no stage 2 label is dropped "
               "and a turn with no claims (left) is faithful; an unparseable stage 3 category -> unknown",
}


def _common_systems(results: dict[str, Any]) -> list[str]:
    return list(results.get("common_coverage", {}).get("systems", []))


def _pair(results: dict[str, Any], rule: str, group: str, a: str, b: str) -> dict[str, Any] | None:
    """The McNemar entry for (a, b) with b/c and Δ oriented as a - b."""
    for p in results["significance"]["by_rule"].get(rule, {}).get(group, []):
        if (p["system_1"], p["system_2"]) == (a, b):
            return p
        if (p["system_1"], p["system_2"]) == (b, a):
            flipped = dict(p, system_1=a, system_2=b, b=p["c"], c=p["b"])
            if p.get("delta") is not None:
                flipped.update(delta=-p["delta"], accuracy_1=p["accuracy_2"], accuracy_2=p["accuracy_1"])
            return flipped
    return None


# -- markdown ------------------------------------------------------------------------------------------

def _given_claims_markdown(results: dict[str, Any]) -> list[str]:
    """Stages 2-3 on the human claims (eval.given_claims): accuracy per benchmark and McNemar per pair."""
    given = results.get("given_claims")
    if not given:
        return []
    names = list(given["systems"])
    groups = [g for g in next(iter(given["systems"].values())) if g != OVERALL] + [OVERALL]
    out = ["## Claim level, human claims given (stages 2 and 3)", "",
           "Each system labels the human claims of every test turn (no stage 1): `stage 2` is VERIFIED vs "
           "not, `category` the five labels. McNemar pairs the same claims.", ""]
    rows = []
    for g in groups:
        maj = results["majority"].get(g, {}).get("claim") or {}
        row = [g, str(((given["systems"][names[0]].get(g) or {}).get("n_labelled_matches")) or "–")]
        for n in names:
            c = given["systems"][n].get(g) or {}
            row.append(f"{_percent(c.get('binary_accuracy'))} / {_percent(c.get('accuracy'))} / "
                       f"{_percent(c.get('macro_f1'))}")
        row.append(f"{_percent(maj.get('binary_accuracy'))} ({maj.get('binary_label', '–')}) / "
                   f"{_percent(maj.get('accuracy'))} ({maj.get('label', '–')})")
        rows.append(row)
    out += [markdown_table(["benchmark", "claims", *[f"{n}: stage 2 / category / macro-F1" for n in names],
                            "majority of the test labels: stage 2 / category"], rows), ""]
    turns = given.get("turns") or {}
    rules = results["settings"]["rules"]
    if turns:
        out += ["Turn verdicts from the human claims (each system's own labels of them, under each rule):", "",
                markdown_table(["system", *(f"turn accuracy {r}" for r in rules), "gold turns"],
                               [[n, *(_percent((turns[n].get(r) or {}).get("accuracy")) for r in rules),
                                 next(((turns[n].get(r) or {}).get("n_gold") for r in rules), "–")] for n in turns]),
                ""]
    parts = given.get("parts") or {}
    if parts:
        out += ["Stage 2 part by part (human claims with the evidence signals; backends/evidence_head.py): the adapter "
                "alone (its label margin > 0), as labelled (with the evidence head where one was applied), and the "
                "overlap rule on the same claims:", "",
                markdown_table(["system", "claims", "head applied", "adapter alone", "as labelled", "overlap rule"],
                               [[n, p["claims"], p["head_applied"], _percent(p["adapter_alone"]),
                                 _percent(p["as_labelled"]), _percent(p["overlap_rule"])] for n, p in parts.items()]),
                ""]
    rows = []
    for level in ("stage2", "category"):
        for g in groups:
            for p in given["significance"][level].get(g, []):
                rows.append([level, g, f"{p['system_1']} − {p['system_2']}", p["n"], _percent(p.get("delta")),
                             _pvalue(p["pvalue"]), p["mark"], f"b={p['b']}, c={p['c']}"])
    if rows:
        out += [markdown_table(["level", "benchmark", "pair", "claims", "Δ acc", "p", "sig.", "discordant (b, c)"],
                               rows), ""]
    return out


def _evidence_markdown(results: dict[str, Any]) -> list[str]:
    """The evidence probes of each system (scoring/evidence.py)."""
    from ..scoring.page import EVIDENCE_HEADER, EVIDENCE_TITLE, evidence_rows

    rows = evidence_rows({n: s.get("evidence") for n, s in results.get("systems", {}).items()})
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


def _probe_scope(results: dict[str, Any]) -> str:
    """Where the whole-reference probes ran on part of the claims (``eval.evidence_conversations``), which part."""
    n = (results.get("settings") or {}).get("evidence_conversations")
    return "" if n is None else (f" The deletion, foreign and edit probes ran on the claims of {n} conversations "
                                 "spread evenly over the evaluation's order (`eval.evidence_conversations`); "
                                 "claim-only and the low / high overlap strata on every claim.")


def _world_markdown(results: dict[str, Any]) -> list[str]:
    """Three-way verdicts (world-knowledge stage, the study's judge) beside the published rows."""
    w = results.get("world")
    if not w:
        return []
    rows = [[name, _number(m["macro_precision"]), _number(m["macro_recall"]), _number(m["macro_f1"]),
             *(_number(x) for x in m["label_accuracy"].values()), m["unknown"], m["n"]]
            for name, m in w["systems"].items()]
    rows += [[f"published: {name}", "", "", _number(f1), "", "", "", "", ""]
             for name, f1 in w["published_macro_f1"].items()]
    out = ["## Three-way verdicts: faithful, factual, non-factual hallucination", "",
           "The mixed-context study's metric (macro precision, recall and F1 over the three labels; an unknown "
           f"verdict counts as wrong). {w['note']}.", "",
           markdown_table(["system", "macro P", "macro R", "macro F1", "acc faithful", "acc factual",
                           "acc non-factual", "unknown", "turns"], rows), ""]
    for name, m in w["systems"].items():
        c = m["confusion"]
        out += [f"Confusion, {name} (rows gold, columns predicted):", "",
                markdown_table(["gold \\ predicted", *c["columns (predicted)"]],
                               [[g, *row] for g, row in zip(c["rows (gold)"], c["matrix"])]), ""]
    return out


def _header_markdown(results: dict[str, Any]) -> list[str]:
    """Title, material, time budget, training overlap and the rules."""
    rules = results["settings"]["rules"]
    mat = results["material"]
    out = [f"# Evaluation: {results['recipe']}", ""]
    src = mat["input"] or ", ".join(s["source"] for s in mat["sources"] if "source" in s)   # not data.leaks' notes
    out.append(f"Material: `{src}` — {mat['conversations']} conversations, {mat['scored_turns']} scored turns "
               f"({mat['gold_turns']} with a gold label), {mat['human_claims']} human claims"
               + (f"; first {mat['limit']} conversations only (--limit)" if mat["limit"] else "") + ".")
    moved = sum((s.get("split") or {}).get("moved_to_train", 0) for s in mat["sources"])
    if moved:
        out.append(f"\n{moved} conversation(s) of the held-out share moved to the training side: their reference is "
                   "also one of a training conversation (`data.split_by: reference`).")
    budget = mat.get("time_budget")
    if budget and budget["conversations_evaluated"] < budget["conversations_planned"]:
        claims = budget.get("conversations_claim_level", budget["conversations_evaluated"])
        out.append(f"\n**Time budget:** `eval.max_minutes` {budget['max_minutes']:g} let "
                   f"{budget['conversations_evaluated']} of the {budget['conversations_planned']} conversations run "
                   "(a random sample, seeded order); every turn-level number below is over those"
                   + (f"; the claim level with the human claims given and the evidence probes covered {claims}."
                      if claims != budget["conversations_evaluated"] else "."))
    ov = mat["student_training_overlap"]
    if ov["evaluated_conversations_in_student_training"]:
        out.append(f"\n**Caution:** {ov['evaluated_conversations_in_student_training']} of the evaluated "
                   f"conversations are in the student's silver training split ({ov['checked_against']}): the "
                   "student's numbers on them are not held-out (set `eval.heldout_only=true` to drop them).")
    described = [f"`{r}`: {RULE_TEXT[r]}" for r in rules if r in RULE_TEXT]
    common = _common_systems(results)
    out += ["", f"Rules: {', '.join(rules)} ({'; '.join(described)}). Turn accuracy is over each system's own "
            "turns with a verdict (coverage beside it); `acc common` is over the gold turns that every system that "
            f"ran ({', '.join(common) or 'none'}) gave a verdict, so systems compare on the same turns (their "
            "number beside it); `acc_all` counts an `unknown` verdict as wrong and is what the "
            "paired tests compare. Significance: " + results["significance"]["test"]
            + "; marks * p<.05, ** p<.01, *** p<.001, ns otherwise. Intervals: "
            f"{results['settings']['bootstrap']} seeded bootstrap resamples (seed {results['settings']['seed']}).", ""]
    return out


def _systems_markdown(results: dict[str, Any]) -> list[str]:
    """Each system: status and what it is."""
    out: list[str] = []
    out += ["## Systems", ""]
    rows = []
    for name, s in results["systems"].items():
        d = s["description"]
        what = ", ".join(f"{k} {d[k]}" for k in ("backend", "prompts", "baseline") if d.get(k))
        if d.get("adapters"):
            what += ", adapters " + ", ".join(sorted(d["adapters"]))
        if d.get("judge_parsed_from"):
            what += ", answers read from " + ", ".join(f"{k} {v}" for k, v in d["judge_parsed_from"].items())
        rows.append([name, s["status"], s["reason"] or what or "–"])
    out += [markdown_table(["system", "status", "details / reason"], rows), ""]
    notes = [f"- {n}: {s['description']['note']}" for n, s in results["systems"].items()
             if s["description"].get("note")]
    out += notes + ([""] if notes else [])
    return out


def _turn_markdown(results: dict[str, Any]) -> list[str]:
    """Turn-level headline metrics, one table per rule."""
    rules = results["settings"]["rules"]
    ok = ok_systems(results)
    out: list[str] = []
    out += ["## Turn level, all benchmarks", ""]
    header = ["system", "acc [95% CI]", "coverage", "acc common (turns)", "acc_all", "bal. acc",
              "P / R / F1 (halluc.)", "macro-F1"]
    maj = results["majority"].get(OVERALL, {}).get("turn") or {}
    for rule in rules:
        rows = []
        for name in ok:
            t = results["metrics"][name][OVERALL]["turn"][rule]
            ci = results["bootstrap"][name][rule][OVERALL]["accuracy"]
            rows.append([name, f"{_percent(t.get('accuracy'))} [{_percent(ci.get('low'))}, {_percent(ci.get('high'))}]",
                         _percent(t.get("coverage")), _common(t), _percent(t.get("accuracy_all")),
                         _percent(t.get("balanced_accuracy")),
                         f"{_percent(t.get('precision'))} / {_percent(t.get('recall'))} / {_percent(t.get('f1'))}",
                         _percent(t.get("macro_f1"))])
        if maj.get("accuracy") is not None:
            acc = _percent(maj["accuracy"])
            rows.append([f"majority ({maj['label']})", acc, "100.0", "–", acc, "50.0", "–", "–"])
        out += [f"Rule `{rule}`:", "", markdown_table(header, rows), ""]
    return out


def _teacher_student_markdown(results: dict[str, Any]) -> list[str]:
    """Teacher against student per benchmark, with McNemar."""
    rules = results["settings"]["rules"]
    ok = ok_systems(results)
    out: list[str] = []
    out += ["## Teacher vs student, per benchmark", ""]
    if "teacher" in ok and "student" in ok:
        for rule in rules:
            rows = []
            for g in benchmark_groups(results):
                st = results["metrics"]["student"].get(g, {}).get("turn", {}).get(rule, {})
                te = results["metrics"]["teacher"].get(g, {}).get("turn", {}).get(rule, {})
                p = _pair(results, rule, g, "student", "teacher") or {}
                rows.append([g, st.get("n_gold"), _percent(st.get("accuracy")), _common(st),
                             _percent(st.get("accuracy_all")), _percent(te.get("accuracy")), _common(te),
                             _percent(te.get("accuracy_all")), _percent(p.get("delta")), _pvalue(p.get("pvalue")),
                             p.get("mark", ""), f"b={p.get('b')}, c={p.get('c')}" if p else "–"])
            out += [f"Rule `{rule}`:", "",
                    markdown_table(["benchmark", "gold turns", "student acc", "student acc common (turns)",
                                    "student acc_all", "teacher acc", "teacher acc common (turns)", "teacher acc_all",
                                    "Δ acc_all (student − teacher)", "p", "sig.", "discordant"], rows), ""]
    else:
        missing = [n for n in ("student", "teacher") if n not in ok]
        why = [f"{n} {results['systems'][n]['status']} (see Systems)" if n in results["systems"]
               else f"{n} not in eval.systems" for n in missing]
        out += [f"Not available: {'; '.join(why)}.", ""]
    return out


def _per_benchmark_markdown(results: dict[str, Any]) -> list[str]:
    """Every system per benchmark, marked against the reference system."""
    rules = results["settings"]["rules"]
    ok = ok_systems(results)
    out: list[str] = []
    ref = "student" if "student" in ok else (ok[0] if ok else None)
    out += [f"## Accuracy per benchmark (all systems; marks: McNemar vs {ref})", ""]
    for rule in rules:
        rows = []
        for g in benchmark_groups(results):
            row = [g]
            for name in ok:
                t = results["metrics"][name].get(g, {}).get("turn", {}).get(rule, {})
                mark = ""
                if ref and name != ref:
                    p = _pair(results, rule, g, ref, name)
                    mark = f" {p['mark']}" if p else ""
                row.append(f"{_percent(t.get('accuracy'))} ({_percent(t.get('coverage'))}); common "
                           f"{_percent(t.get('accuracy_common'))}{mark}")
            c = results.get("common_coverage", {}).get("by_rule", {}).get(rule, {}).get(g, {})
            rows.append([*row, c.get("n", "–")])
        out += [f"Rule `{rule}` — accuracy (coverage); common: accuracy on the turns every system covered:", "",
                markdown_table(["benchmark", *ok, "common turns"], rows), ""]
    return out


def _claim_markdown(results: dict[str, Any]) -> list[str]:
    """Claim level on the human claims (the paper's Table 5), overall and per benchmark."""
    rules = results["settings"]["rules"]
    ok = ok_systems(results)
    out: list[str] = []
    rule0 = rules[0]
    out += ["## Claim level (human claims; cf. the paper's Table 5)", "",
            (f"Matching: {results['claim_matching']['method']}. Claim accuracy and macro-F1 are over the five "
             "labels on matched claims; `binary` is VERIFIED vs not; set F1 / Jaccard compare the predicted and "
             "human claim sets; AUC / ECE / Brier are from stage 2 P(VERIFIED) on matched claims."), ""]
    rows = []
    for name in ok:
        c = results["metrics"][name][OVERALL].get("claim")
        t = results["metrics"][name][OVERALL]["turn"][rule0]
        if not c:
            rows.append([name, _percent(t.get("accuracy")), _common(t)] + ["–"] * 9)
            continue
        cal = c.get("stage2_calibration") or {}
        rows.append([name, _percent(t.get("accuracy")), _common(t), _percent(c.get("accuracy")),
                     _percent(c.get("macro_f1")), _percent(c.get("binary_accuracy")),
                     f"{c['matched']}/{c['human_claims']} ({c['matched_exact']} exact)", _percent(c.get("set_f1")),
                     _percent(c.get("set_jaccard")), _number(cal.get("roc_auc")), _number(cal.get("ece")),
                     _number(cal.get("brier"))])
    mc = results["majority"].get(OVERALL, {}).get("claim")
    if mc:
        rows.append([f"majority ({mc['label']})", "–", "–", _percent(mc["accuracy"]), _percent(mc["macro_f1"])]
                    + ["–"] * 7)
    out += [markdown_table(["system", f"turn acc ({rule0})", "turn acc common (turns)", "claim acc", "macro-F1",
                            "binary acc", "matched", "set F1", "Jaccard", "AUC", "ECE", "Brier"], rows), ""]
    # per benchmark claim accuracy
    rows = []
    for g in benchmark_groups(results):
        row = [g]
        for name in ok:
            c = results["metrics"][name].get(g, {}).get("claim") or {}
            row.append(f"{_percent(c.get('accuracy'))} / {_percent(c.get('macro_f1'))}" if c.get("accuracy") is not None
                       else _percent(c.get("binary_accuracy"))
                       + (" (binary)" if c.get("binary_accuracy") is not None else ""))
        rows.append(row)
    out += ["Claim accuracy / macro-F1 per benchmark:", "", markdown_table(["benchmark", *ok], rows), ""]
    return out


def _significance_markdown(results: dict[str, Any]) -> list[str]:
    """McNemar over all pairs of systems, overall."""
    rules = results["settings"]["rules"]
    out: list[str] = []
    out += ["## McNemar, all pairs (all benchmarks)", ""]
    for rule in rules:
        rows = []
        for p in results["significance"]["by_rule"].get(rule, {}).get(OVERALL, []):
            rows.append([f"{p['system_1']} − {p['system_2']}", p["n"], _percent(p.get("delta")), _pvalue(p["pvalue"]),
                         p["mark"], f"b={p['b']}, c={p['c']}"])
        out += [f"Rule `{rule}`:", "",
                markdown_table(["pair", "turns", "Δ acc_all", "p", "sig.", "discordant (b, c)"], rows)
                if rows else "(fewer than two systems ran)", ""]
    return out


def _speed_markdown(results: dict[str, Any]) -> list[str]:
    """Speed, memory and cost per system, and the hardware."""
    out: list[str] = []
    out += ["## Speed and cost", ""]
    rows = []
    for name, s in results["systems"].items():
        if s["status"] != "ok":
            rows.append([name, s["status"]] + ["–"] * 7)
            continue
        e = s["efficiency"]
        cost = e.get("cost_per_1k_turns")
        cached = e.get("cache_hit_share")
        speed = _number(e["turns_per_s"], 3) + (f" ({cached:.0%} cached)" if cached else "")
        rows.append([name, _number(e["wall_s"], 1), speed, _number(e.get("prompt_tokens")),
                     _number(e.get("completion_tokens")), _number(e["peak_rss_mb"], 0),
                     _number(e.get("cuda_max_memory_allocated_mb"), 0), _number(s["description"].get("load_s"), 1),
                     f"${cost['usd']:.4f}" if cost else "no price configured"])
    out += [markdown_table(["system", "wall s", "turns/s", "prompt tokens", "generated tokens", "peak RSS MB",
                    "CUDA peak MB", "model load s", "cost / 1k turns"], rows), "",
            ("Peak RSS is the whole process's (models loaded earlier stay counted); the base model is loaded once "
             "for base, llm_judge and factscore. \"cached\": share of the teacher's calls answered from its call "
             "cache, so that speed is not the teacher's."), ""]
    hw = results.get("hardware")
    if hw:
        out += [(f"Measured on {hw['device']}: {hw['device_name']} (torch {hw['torch']}), local models in "
                 f"{hw['dtype']} ({hw['dtype_reason']}), {hw['threads']} thread(s) ({hw['threads_reason']})."), ""]
    return out


def _reproducibility_markdown(results: dict[str, Any], plots: Sequence[str]) -> list[str]:
    """Fingerprint, comparison with a previous run, and the plots."""
    out: list[str] = []
    out += ["## Reproducibility", "",
            (f"Fingerprint of metrics, tests and intervals: `{results['fingerprint']}` "
             f"(seed {results['settings']['seed']}); total wall time {results['wall_s']:.0f} s.")]
    cmp = results.get("compare")
    if cmp:
        out.append(f"Compared with `{cmp['previous']}`: " + ("identical." if cmp["identical"] else
                   "DIFFERENT: " + "; ".join(cmp["differences"][:10])))
    out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return out


def render_markdown(results: dict[str, Any], plots: Sequence[str]) -> str:
    """report.md: its sections in order."""
    from .stage_rules import attribution_markdown, stage_rules_markdown
    from .tuning import tuned_markdown
    sections = [_header_markdown(results), _systems_markdown(results), _turn_markdown(results),
                _teacher_student_markdown(results), _per_benchmark_markdown(results), _claim_markdown(results),
                _given_claims_markdown(results), stage_rules_markdown(results), attribution_markdown(results),
                tuned_markdown(results),
                _evidence_markdown(results), _world_markdown(results), _significance_markdown(results),
                _speed_markdown(results), _reproducibility_markdown(results, plots)]
    return "\n".join(line for section in sections for line in section)


def write_report(out_dir: str | Path, results: dict[str, Any]) -> dict[str, Path]:
    """Write ``results.json``, the three plots and ``report.md`` into ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {p: out / p for p in PLOTS}
    plot_accuracy(results, paths["accuracy.png"])
    plot_confusion(results, paths["confusion_stage3.png"])
    plot_calibration(results, paths["calibration.png"])
    results["plots"] = list(PLOTS)
    paths["results.json"] = out / "results.json"
    atomic_write_text(paths["results.json"], json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    paths["report.md"] = out / "report.md"
    atomic_write_text(paths["report.md"], render_markdown(results, PLOTS))
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
