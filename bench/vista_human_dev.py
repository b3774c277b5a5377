"""python bench/vista_human_dev.py --adapters runs/demo-cpu/checkpoints [--silver runs/demo-cpu/silver] [--tag T]
    [--systems student overlap] [--no-evidence]
python bench/vista_human_dev.py --adapters runs/demo-cpu/checkpoints --calibration [--seeds 5] [--no-curve]

A demo run's student on the VISTA human dev set (``../shared/data/vista_human/dev.json``, validation only: never a
test), beside the prompted base and the cheap rules (majority, overlap, pmi): the whole pipeline per turn under the
safe rule (VISTA's gold rule on this set), the turn verdicts each system gives the human claims, stage 2 on the human
claims part by part, stage 3's confusion against the human categories, and where the student loses its turns stage by
stage (scoring/attribution.py: its stage 1 and stage 3 replaced by their rules and by the human annotation).

Writes bench/results/vista_human_dev/<cpu>[_<tag>].json and .md (the eval run folder goes to /tmp).

With ``--calibration``: what ``vista-distill calibrate`` gives on this set. The student's stages 2-3 run once on the
human claims; then the calibration's cross-validated choice over the 35 conversations (the student's candidates and
each stage's rule, stage 1 by turn accuracy on the whole pipeline; McNemar and stage 3's confusion before and after),
and the dev-size curve: a calibration fitted on k conversations (``--seeds`` draws each) and judged on the
conversations it did not see. Writes bench/results/vista_human_dev/calibration_<cpu>.md, .json and .png."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import harness

from vista_distill.runtime.numbers import percent as _pct

ROOT = Path(__file__).resolve().parents[1]

DEV = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"
OUT = ROOT / "bench" / "results" / "vista_human_dev"
SYSTEMS = ["student", "base", "pmi", "overlap", "majority"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", type=Path, default=ROOT / "runs" / "demo-cpu" / "checkpoints")
    ap.add_argument("--silver", type=Path, default=None, help="default: beside the adapters")
    ap.add_argument("--tag", default="demo")
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--systems", nargs="+", default=SYSTEMS, choices=SYSTEMS)
    ap.add_argument("--evidence", action=argparse.BooleanOptionalAction, default=True,
                    help="the evidence probes of student and base (--no-evidence: without them, faster)")
    ap.add_argument("--calibration", action="store_true", help="measure calibrate on the set (see above)")
    ap.add_argument("--seeds", type=int, default=5, help="--calibration: draws per dev-set size")
    ap.add_argument("--curve", action=argparse.BooleanOptionalAction, default=True,
                    help="--calibration: the dev-size curve (--no-curve: the calibration alone)")
    a = ap.parse_args()
    if a.calibration:
        return calibration(a)
    out = evaluate(a)
    path = harness.save(OUT, harness.result_name(out["machine"], a.tag), out)
    path.with_suffix(".md").write_text("\n".join(eval_markdown(out, a)) + "\n")
    print(path.with_suffix(".md").read_text())


def evaluate(a: argparse.Namespace) -> dict:
    """``vista-distill eval`` of the systems on the dev set, the figures this benchmark keeps."""
    from vista_distill.config import load_recipe
    from vista_distill.eval.run import EvalProgress, run_eval
    from vista_distill.scoring.metrics import OVERALL

    silver = a.silver or a.adapters.parent / "silver"
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml",
                         [f"train.output_dir={a.adapters}", f"distill.output_dir={silver}", "eval.max_minutes=null",
                          "eval.tune_on=[]", "eval.given_claims=true", f"eval.evidence={str(a.evidence).lower()}"])
    m = harness.machine()
    t0 = time.perf_counter()
    res = run_eval(recipe, input_path=str(a.dev), systems=a.systems, output_dir=f"/tmp/vista-human-dev-{a.tag}",
                   progress=EvalProgress(bars=True)).results
    given = res.get("given_claims") or {}
    out = {"machine": m, "commit": harness.commit(), "adapters": str(a.adapters),
           "adapter_steps": adapter_steps(a.adapters), "dev": str(a.dev), "evidence_probes": a.evidence,
           "seconds": round(time.perf_counter() - t0),
           "material": {k: res["material"][k] for k in ("conversations", "scored_turns", "gold_turns", "human_claims")},
           "systems": {}}
    for name in a.systems:
        s = res["systems"][name]
        if s["status"] != "ok":
            out["systems"][name] = {"status": s["status"], "reason": s["reason"]}
            continue
        turn = res["metrics"][name][OVERALL]["turn"]
        claims = (given.get("systems", {}).get(name) or {}).get(OVERALL) or {}
        out["systems"][name] = {
            "pipeline_turns": {r: {k: turn[r].get(k) for k in ("accuracy", "coverage", "n_gold")} for r in turn},
            "given_claims_turns": (given.get("turns") or {}).get(name),
            "claims_stage2": claims.get("binary_accuracy"), "claims_category": claims.get("accuracy"),
            "claims_macro_f1": claims.get("macro_f1"), "stage3_confusion": claims.get("confusion"),
            "parts": (given.get("parts") or {}).get(name), "evidence": s.get("evidence"),
            "turns_per_s": (s.get("efficiency") or {}).get("turns_per_s")}
    out["attribution"] = (res.get("attribution") or {}).get("student")
    out["significance_turns_safe"] = [p for p in res["significance"]["by_rule"]["safe"][OVERALL]
                                      if "student" in (p["system_1"], p["system_2"])]
    out["significance_claims"] = [p for p in given.get("significance", {}).get("stage2", {}).get(OVERALL, [])
                                  if "student" in (p["system_1"], p["system_2"])]
    return out


def eval_markdown(out: dict, a: argparse.Namespace) -> list[str]:
    lines = [f"# {a.tag}: the demo's student on the VISTA human dev set", "",
             harness.header(out["machine"], f"adapters `{a.adapters}`; {out['material']['gold_turns']} gold turns, "
                            f"{out['material']['human_claims']} human claims; {out['seconds']} s. Command: "
                            f"`python bench/vista_human_dev.py --adapters {a.adapters} --tag {a.tag} --systems "
                            f"{' '.join(a.systems)}{'' if a.evidence else ' --no-evidence'}`."), "",
             "| system | pipeline turns safe | pipeline turns strict | human claims -> turns safe | claims stage 2 | "
             "claims category |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for n, s in out["systems"].items():
        if "pipeline_turns" not in s:
            lines.append(f"| {n} | {s['status']}: {s['reason']} | | | | |")
            continue
        gt = (s["given_claims_turns"] or {}).get("safe") or {}
        lines.append(f"| {n} | {_pct(s['pipeline_turns']['safe']['accuracy'])} | "
                     f"{_pct(s['pipeline_turns']['strict']['accuracy'])} | {_pct(gt.get('accuracy'))} | "
                     f"{_pct(s['claims_stage2'])} | {_pct(s['claims_category'])} |")
    st = out["systems"].get("student", {})
    if st.get("stage3_confusion"):
        c = st["stage3_confusion"]
        lines += ["", "Student, categories on the human claims (rows human, columns predicted):", "",
                  "| human \\ predicted | " + " | ".join(c["labels"]) + " |",
                  "| --- |" + " ---: |" * len(c["labels"])]
        lines += [f"| {lab} | " + " | ".join(map(str, row)) + " |" for lab, row in zip(c["labels"], c["matrix"])]
    if st.get("parts"):
        p = st["parts"]
        lines += ["", f"Student stage 2 part by part on {p['claims']} human claims: adapter alone "
                      f"{_pct(p['adapter_alone'])}, with the evidence head {_pct(p['as_labelled'])}, the overlap rule "
                      f"{_pct(p['overlap_rule'])}."]
    table = ((out["attribution"] or {}).get("rows") or {}).get("safe")
    if table:
        from vista_distill.eval.report_format import markdown_table
        from vista_distill.scoring.attribution import ROW_HEADER, attribution_rows

        lines += ["", f"Where the student loses its turns ({table['turns']} gold turns, safe rule, unknown = wrong; "
                      "McNemar against the row above; scoring/attribution.py):", "",
                  markdown_table(ROW_HEADER, attribution_rows(table))]
    return lines


def calibration(a: argparse.Namespace) -> None:
    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer
    from vista_distill.scoring.calibrate import choose_stage1, dev_fingerprint, dev_records, fit_calibration

    m = harness.machine()
    convs = read_conversations(a.dev)
    scorer = VistaScorer.from_pretrained(a.adapters)
    t0 = time.perf_counter()
    records = dev_records(convs, scorer.config, scorer.backend)
    seconds = round(time.perf_counter() - t0)
    prior = scorer.backend.priors.get("stage3")
    cal = fit_calibration(records, "vista-human-dev", dev_fingerprint(convs, a.dev), 5, prior)
    t1 = time.perf_counter()
    cal = choose_stage1(cal, convs, scorer.config, scorer.backend, "safe")
    seconds_stage1 = round(time.perf_counter() - t1)
    curve = dev_size_curve(records, prior, a.seeds) if a.curve else []
    out = {"machine": m, "commit": harness.commit(), "adapters": str(a.adapters),
           "adapter_steps": adapter_steps(a.adapters), "dev": str(a.dev),
           "seconds_student": seconds, "seconds_stage1": seconds_stage1, "calibration": cal.to_dict(), "curve": curve}
    path = harness.save(OUT, "calibration_" + harness.result_name(m, None), out)
    if curve:
        _plot_curve(curve, path.with_suffix(".png"))
    path.with_suffix(".md").write_text("\n".join(calibration_markdown(out, cal, a, path)) + "\n")
    print(path.with_suffix(".md").read_text())


def dev_size_curve(records: list[dict], prior, seeds: int) -> list[dict]:
    """Calibrations (stages 2-3) fitted on k of the dev conversations (``seeds`` draws each), judged on the
    others: mean and sd of each stage's accuracy as trained and as calibrated."""
    import numpy as np

    from vista_distill.scoring.calibrate import claim_rows, fit_calibration, held_out_accuracy

    by_conv: dict[str, list[dict]] = {}
    for r in records:
        by_conv.setdefault(str(r["conversation_id"]), []).append(r)
    ids = sorted(by_conv)
    curve = []
    for k in [n for n in (4, 8, 12, 16, 20, 24, 28) if n < len(ids) - 2]:
        draws = []
        for seed in range(seeds):
            fit_ids = set(np.random.default_rng(seed).choice(ids, k, replace=False).tolist())
            rest = claim_rows([r for i in ids if i not in fit_ids for r in by_conv[i]])
            try:
                c = fit_calibration([r for i in fit_ids for r in by_conv[i]], f"k{k}", {}, 5, prior)
            except ValueError:
                continue
            draws.append(held_out_accuracy(c, rest))
        row = {"conversations": k, "draws": len(draws)}
        for stage in ("stage2", "stage3"):
            for which in ("as_trained", "calibrated"):
                v = [d[stage][which] for d in draws if d[stage][which] is not None]
                row[f"{stage}_{which}"] = (float(np.mean(v)), float(np.std(v))) if v else None
        curve.append(row)
    return curve


def calibration_markdown(out: dict, cal, a: argparse.Namespace, path: Path) -> list[str]:
    from vista_distill.scoring.calibrate import summary_rows

    lines = ["# calibrate on the VISTA human dev set", "",
             harness.header(out["machine"], f"adapters `{a.adapters}`; {cal.fitted['dev']['claims']} human claims in "
                            f"{cal.fitted['dev']['conversations']} conversations; student {out['seconds_student']} s, "
                            f"stage 1 {out['seconds_stage1']} s. Command: `python bench/vista_human_dev.py --adapters "
                            f"{a.adapters} --calibration`."), "",
             f"Cross-validated by conversation ({cal.fitted['stage2'].get('folds', 5)} folds; what `vista-distill "
             "calibrate` prints; the rules among the candidates, each taking its stage only by the margin):", "",
             "| stage | candidate | accuracy % | balanced accuracy % | chosen |", "| --- | --- | ---: | ---: | --- |"]
    lines += [f"| {' | '.join(r)} |" for r in summary_rows(cal)]
    for stage in ("stage1", "stage2", "stage3"):
        f = cal.fitted.get(stage) or {}
        vs = f.get("rule_vs_student")
        if vs:
            lines += ["", f"{stage}: chosen `{f['chosen']}`; the {vs['rule']} against `{vs['student']}`: "
                          f"{vs['only_rule_right']} items only the rule gets right, {vs['only_student_right']} only "
                          f"the student, McNemar p = {vs['p_value']:.3g} (alpha {f['rule_margin']['alpha']})."]
        if "mcnemar_chosen_vs_as_trained" in f:
            mc = f["mcnemar_chosen_vs_as_trained"]
            lines[-1] += (f" The chosen against as trained: {mc['only_first_right']} only the chosen, "
                          f"{mc['only_second_right']} only as trained, p = {mc['p_value']:.3g}.")
    s3 = cal.fitted["stage3"]
    if "labels" in s3:
        for which in ("as_trained", "chosen"):
            lines += ["", f"Stage 3 confusion, {which.replace('_', ' ')} (rows human, columns predicted; out of fold):",
                      "", "| human \\ predicted | " + " | ".join(s3["labels"]) + " |",
                      "| --- |" + " ---: |" * len(s3["labels"])]
            lines += [f"| {lab} | " + " | ".join(map(str, row)) + " |"
                      for lab, row in zip(s3["labels"], s3[f"confusion_{which}"])]
    if out["curve"]:
        lines += ["", f"Dev-size curve: a calibration fitted on k conversations, judged on the others ({a.seeds} "
                      f"draws each; mean ± sd, %; `{path.with_suffix('.png').name}`):", "",
                  "| k | draws | stage 2 as trained | stage 2 calibrated | stage 3 as trained | stage 3 calibrated |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        ms = lambda v: "–" if v is None else f"{_pct(v[0])} ± {_pct(v[1])}"  # noqa: E731
        lines += [f"| {r['conversations']} | {r['draws']} | {ms(r['stage2_as_trained'])} | "
                  f"{ms(r['stage2_calibrated'])} | {ms(r['stage3_as_trained'])} | {ms(r['stage3_calibrated'])} |"
                  for r in out["curve"]]
    return lines


def adapter_steps(adapters: Path) -> dict[str, dict[str, int | None]]:
    """Each stage's optimizer steps done and planned, from its ``training_summary.json`` (a run cut by
    ``train.max_minutes`` did fewer than planned)."""
    import json

    out = {}
    for summary in sorted(adapters.glob("*/training_summary.json")):
        s = json.loads(summary.read_text(encoding="utf-8"))
        r, budget = s.get("results") or {}, s.get("time_budget") or {}
        out[summary.parent.name] = {"done": r.get("global_step"),
                                    "planned": r.get("planned_steps", budget.get("planned_steps"))}
    return out


def _plot_curve(curve: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharex=True)
    for ax, stage in zip(axes, ("stage2", "stage3")):
        for which, style in (("as_trained", "--"), ("calibrated", "-")):
            pts = [(r["conversations"], *r[f"{stage}_{which}"]) for r in curve if r[f"{stage}_{which}"]]
            if pts:
                k, mean, sd = zip(*pts)
                ax.errorbar(k, [100 * x for x in mean], yerr=[100 * x for x in sd], linestyle=style, marker="o",
                            capsize=3, label=which.replace("_", " "))
        ax.set_title(f"{stage}, held-out conversations")
        ax.set_xlabel("dev conversations the calibration saw")
        ax.set_ylabel("accuracy %")
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
