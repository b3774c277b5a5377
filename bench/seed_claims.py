"""The demo's student against the cheap rules at claim level over all 134 test claims, several training seeds: stage 2
(with its evidence head) trained as the demo trains it (``recipes/demo-cpu.yaml``, its time limits) with
``train.seed=N``, then stages 2-3 on the test's human claims with the evidence probes, beside the prompted base and
the ``majority``, ``overlap`` and ``pmi`` rules (seed-independent: run once). McNemar of each seed's student against
each, exact. Seed 0 reuses the demo run's own adapters.

    python bench/seed_claims.py --run /path/to/vista-distill/runs/demo-cpu --seeds 0 1 2 --tag c456b78

Writes bench/results/seed_claims/<cpu>_<date>_<tag>.json and .md; trained adapters go to /tmp/seed-claims/."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

OUT = ROOT / "bench" / "results" / "seed_claims"
WORK = Path("/tmp/seed-claims")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="a demo run folder (silver/, checkpoints/)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--tag", default="demo")
    ap.add_argument("--override", action="append", default=[],
                    help="recipe override for the trained seeds, e.g. train.per_stage.stage2.max_steps=288 (a longer "
                         "recipe; seed 0 then trains too)")
    a = ap.parse_args()
    from vista_distill.backends.rules import RuleBackend, majority_labels
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.config import load_recipe
    from vista_distill.data.material import load_material
    from vista_distill.scoring import metrics as M
    from vista_distill.scoring.evidence import evidence_metrics
    from vista_distill.scoring.run import run_given_claims
    from vista_distill.scoring.significance import paired_mcnemar
    from vista_distill.train.evidence_fit import load_pmi_head

    m = harness.machine()
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml", [f"distill.output_dir={a.run / 'silver'}",
                                                              f"train.output_dir={a.run / 'checkpoints'}"])
    test = load_material(recipe).test
    student_cfg = recipe.engine_config("student")
    rule_cfg = dataclasses.replace(student_cfg, stage2="score", stage3="score", world=False)
    runs: dict[str, tuple] = {}
    t0 = time.perf_counter()
    base = TransformersBackend(recipe.student.model, dtype=recipe.student.dtype, batch_size=recipe.eval.batch_size,
                               threads="auto")
    runs["base"] = run_given_claims(test, recipe.engine_config("base"), base, evidence_seed=0)
    runs["pmi"] = run_given_claims(test, rule_cfg, RuleBackend("pmi", model=base, head=load_pmi_head(recipe)),
                                   evidence_seed=0)
    runs["overlap"] = run_given_claims(test, rule_cfg, RuleBackend("overlap"), evidence_seed=0)
    runs["majority"] = run_given_claims(test, rule_cfg, RuleBackend(
        "majority", majority=majority_labels(a.run / "silver")), evidence_seed=0)
    del base
    rules_s = time.perf_counter() - t0
    trained: dict[str, dict] = {}
    for seed in a.seeds:
        ckpt = a.run / "checkpoints"
        t1 = time.perf_counter()
        if seed != 0 or a.override:
            from vista_distill.train.run import train_stage

            ckpt = WORK / f"seed{seed}" / "checkpoints"
            shutil.rmtree(ckpt, ignore_errors=True)
            r = load_recipe(ROOT / "recipes" / "demo-cpu.yaml", [f"distill.output_dir={a.run / 'silver'}",
                                                                 f"train.output_dir={ckpt}", f"train.seed={seed}",
                                                                 *a.override])
            s = train_stage(r, "stage2")
            trained[str(seed)] = {"steps": s["results"]["global_step"], "time_budget": s.get("time_budget"),
                                  "evidence_head": s.get("evidence_head")}
        backend = TransformersBackend(recipe.student.model, adapters={"stage2": ckpt / "stage2",
                                                                      "stage3": a.run / "checkpoints" / "stage3"},
                                      dtype=recipe.student.dtype, batch_size=recipe.eval.batch_size, threads="auto")
        runs[f"student-seed{seed}"] = run_given_claims(test, student_cfg, backend, evidence_seed=0)
        trained.setdefault(str(seed), {})["seconds"] = round(time.perf_counter() - t1)
        del backend
    correct = {n: M.claim_correctness(recs) for n, (recs, _) in runs.items()}
    out = {"machine": m, "commit": harness.commit(),
           "run": str(a.run), "rules_seconds": round(rules_s), "trained": trained,
           "test": {"conversations": len(test), "claims": len(next(iter(correct.values())))},
           "systems": {}, "mcnemar": []}
    for n, (recs, probes) in runs.items():
        c = correct[n]
        out["systems"][n] = {"claims": len(c), "accuracy": sum(c.values()) / len(c),
                             "parts": M.head_parts(recs), "evidence": evidence_metrics(probes)}
    for seed in a.seeds:
        s = f"student-seed{seed}"
        for other in ("base", "pmi", "overlap", "majority"):
            keys = sorted(set(correct[s]) & set(correct[other]))
            t = paired_mcnemar([correct[s][k] for k in keys], [correct[other][k] for k in keys])
            out["mcnemar"].append({"student": s, "other": other, **t})
    path = harness.save(OUT, harness.dated_name(m, a.tag), out)
    lines = [f"# {a.tag}: the demo's student against the cheap rules over the test claims, seeds {a.seeds}", "",
             harness.header(m, f"demo run `{a.run}`; {out['test']['claims']} human claims of "
                            f"{out['test']['conversations']} test conversations. Command: `python bench/seed_claims.py --run {a.run} "
                            f"--seeds {' '.join(map(str, a.seeds))} --tag {a.tag}"
                            + "".join(f" --override {o}" for o in a.override) + "`."), "",
             "| system | claims (stage 2) | adapter alone | edit flip rate | VERIFIED, low overlap | "
             "unverifiable, high overlap |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for n, s in out["systems"].items():
        ev, parts = s["evidence"], s["parts"] or {}
        lines.append(f"| {n} | {_pct(s['accuracy'])} | {_pct(parts.get('adapter_alone')) if n.startswith('student') else ''}"
                     f" | {ev['edit_flip_rate'] if ev['edit_flip_rate'] is None else round(ev['edit_flip_rate'], 3)} | "
                     f"{_pct(ev['strata']['verified_low_overlap']['accuracy'])} | "
                     f"{_pct(ev['strata']['unverifiable_high_overlap']['accuracy'])} |")
    lines += ["", "| student | other | Δ accuracy | b / c | p (McNemar, exact) |", "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {t['student']} | {t['other']} | {100 * t['delta']:+.1f} | {t['b']} / {t['c']} | {t['pvalue']:.2g} |"
              for t in out["mcnemar"]]
    lines += ["", "Trained: " + "; ".join(f"seed {k}: {v}" for k, v in trained.items())]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
