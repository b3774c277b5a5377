"""python bench/vista_human_dev.py --adapters runs/demo-cpu/checkpoints [--silver runs/demo-cpu/silver] [--tag T]

A demo run's student on the VISTA human dev set (``../shared/data/vista_human/dev.json``, validation only: never a
test), beside the prompted base and the cheap rules (majority, overlap, pmi): the whole pipeline per turn under the
safe rule (VISTA's gold rule on this set), the turn verdicts each system gives the human claims, stage 2 on the human
claims part by part, and stage 3's confusion against the human categories.

Writes bench/results/vista_human_dev/<cpu>[_<tag>].json and .md (the eval run folder goes to /tmp)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"
OUT = ROOT / "bench" / "results" / "vista_human_dev"
SYSTEMS = ["student", "base", "pmi", "overlap", "majority"]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", type=Path, default=ROOT / "runs" / "demo-cpu" / "checkpoints")
    ap.add_argument("--silver", type=Path, default=None, help="default: beside the adapters")
    ap.add_argument("--tag", default="demo")
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--systems", nargs="+", default=SYSTEMS, choices=SYSTEMS)
    a = ap.parse_args()
    from vista_distill.config import load_recipe
    from vista_distill.scoring.metrics import OVERALL
    from vista_distill.eval.run import run_eval

    silver = a.silver or a.adapters.parent / "silver"
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml",
                         [f"train.output_dir={a.adapters}", f"distill.output_dir={silver}", "eval.max_minutes=null",
                          "eval.given_claims=true"])
    m = harness.machine()
    t0 = time.perf_counter()
    res = run_eval(recipe, input_path=str(a.dev), systems=a.systems, output_dir=f"/tmp/vista-human-dev-{a.tag}",
                   progress=True).results
    given = res.get("given_claims") or {}
    out = {"machine": m, "commit": harness.commit(),
           "adapters": str(a.adapters), "dev": str(a.dev), "seconds": round(time.perf_counter() - t0),
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
    out["significance_turns_safe"] = [p for p in res["significance"]["by_rule"]["safe"][OVERALL]
                                      if "student" in (p["system_1"], p["system_2"])]
    out["significance_claims"] = [p for p in given.get("significance", {}).get("stage2", {}).get(OVERALL, [])
                                  if "student" in (p["system_1"], p["system_2"])]
    path = harness.save(OUT, harness.result_name(m, a.tag), out)
    lines = [f"# {a.tag}: the demo's student on the VISTA human dev set", "",
             harness.header(m, f"adapters `{a.adapters}`; {out['material']['gold_turns']} gold turns, "
                            f"{out['material']['human_claims']} human claims; {out['seconds']} s. Command: "
                            f"`python bench/vista_human_dev.py --adapters {a.adapters} --tag {a.tag}`."), "",
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
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
