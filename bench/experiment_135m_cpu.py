"""python bench/experiment_135m_cpu.py [--threads 1] [--jobs 2] [--pipeline-n 60] [--steps material,distill,...]

The local distillation experiment: does distillation make the 135M scorer better?

Recipe ``recipes/experiment-135m-cpu.yaml``: the human claim labels of the labelled development data
in ``../shared/data`` (VISTA human re-annotation, DialFact, FineDialFact) are the teacher; 40% of each
source's dialogues are held out, plus BEGIN and FADE samples that are never trained on. Three LoRA
adapters on the embedded SmolLM2-135M-Instruct (student, compact prompts) are compared with the
same base model prompted with the paper's few-shot prompts (base) on the held-out material:

1. ``material``   held-out conversations written per benchmark (``runs/<name>/heldout/``);
2. ``distill``    silver data of the train material (labels teacher, seconds);
3. ``train``      the three adapters (stage 1: 4 epochs of 35 examples; stages 2-3: one epoch);
4. ``claims``     claim level with the human claims given: stage 2 and stage 3 labels of every
                  held-out human claim, picked by likelihood, student vs base (few-shot and compact
                  prompts), accuracy, macro-F1, exact McNemar;
5. ``pipeline``   the whole pipeline (``vista-distill eval``) per held-out benchmark, student vs base:
                  turn accuracy (safe/strict rule), coverage, matched-claim accuracy and macro-F1 (VISTA
                  human set), McNemar, seconds and tokens per turn;
6. ``report``     ``bench/results/experiment_135m_cpu/{report.md,results.json,turn_accuracy.png}``.

Every step skips what is already on disk, so a rerun after a crash continues.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "experiment-135m-cpu.yaml"
DEST = ROOT / "bench" / "results" / "experiment_135m_cpu"
STEPS = ("material", "distill", "train", "claims", "pipeline", "report")
# Training variants: epochs per stage and recipe overrides. The first is the recipe as written.
VARIANTS: dict[str, dict[str, Any]] = {
    "weights-1ep": {"epochs": {"stage1": 4, "stage2": 1, "stage3": 1}, "overrides": []},
    # gradient checkpointing: same numbers, 7.7 instead of 11.7 GB peak RSS, so two stages can train at once
    "nobal-2ep": {"epochs": {"stage1": 4, "stage2": 2, "stage3": 2},
                  "overrides": ["train.class_balance=none", "train.gradient_checkpointing=true"]},
}
DEFAULT_VARIANT = "weights-1ep"
CLAIM_GROUPS = ("vista-human", "dialfact", "finedialfact")      # held-out data with human claims
PIPELINE_GROUPS = ("vista-human", "dialfact", "begin", "fade")   # FineDialFact: one fact of long turns
SYSTEMS = {"student": "adapter, compact prompt", "base_fewshot": "no adapter, few-shot (A.1) prompt",
           "base_compact": "no adapter, compact prompt"}


def run_dir(name: str) -> Path:
    return ROOT / "runs" / name


def timings_path(name: str) -> Path:
    return run_dir(name) / "timings.json"


def record_time(name: str, step: str, seconds: float, extra: dict[str, Any] | None = None) -> None:
    path = timings_path(name)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[step] = {"seconds": round(seconds, 1), **(extra or {})}
    path.write_text(json.dumps(data, indent=2))


def cli(*args: str, log: Path) -> float:
    """Run ``vista-distill ARGS`` from the repo root, output to ``log``; seconds taken."""
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "vista_distill", *args], cwd=ROOT, stdout=f,
                              stderr=subprocess.STDOUT)
    if proc.returncode:
        raise SystemExit(f"vista-distill {' '.join(args)} failed (exit {proc.returncode}); see {log}")
    return time.perf_counter() - t


# -- steps ---------------------------------------------------------------------------------------------

def step_material(recipe: Any, pipeline_n: int, seed: int) -> dict[str, Any]:
    from vista_distill.data.io import write_conversations
    from vista_distill.data.material import load_material
    from vista_distill.data.sampling import sample_conversations

    out = run_dir(recipe.name) / "heldout"
    out.mkdir(parents=True, exist_ok=True)
    material = load_material(recipe)
    groups: dict[str, list] = {}
    for c in material.test:
        groups.setdefault(c.meta.get("benchmark", c.source), []).append(c)
    summary: dict[str, Any] = {"train_conversations": dict(Counter(c.meta.get("benchmark") for c in material.train)),
                               "sources": material.reports, "heldout": {}}
    for group, convs in sorted(groups.items()):
        write_conversations(convs, out / f"{group}.jsonl")
        entry = {"conversations": len(convs), "scored_turns": sum(len(c.scored_turns) for c in convs),
                 "human_claims": sum(len(c.turns[i].gold_claims or []) for c in convs for i in c.scored_turns)}
        if group in PIPELINE_GROUPS:
            sample = convs if len(convs) <= pipeline_n else sample_conversations(convs, pipeline_n, seed)
            write_conversations(sample, out / f"{group}.pipeline.jsonl")
            entry["pipeline_conversations"] = len(sample)
        summary["heldout"][group] = entry
    (out / "material.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def variant_overrides(recipe: Any, variant: str) -> list[str]:
    """Recipe overrides of a variant; variants other than the default train into their own folder."""
    extra = [] if variant == DEFAULT_VARIANT else [f"train.output_dir=checkpoints/{recipe.name}-{variant}"]
    return [*VARIANTS[variant]["overrides"], *extra]


def variant_recipe(variant: str) -> Any:
    from vista_distill.config import load_recipe

    # benchmarks read ../shared/data unless a data root is set
    root = os.environ.get("VISTA_DISTILL_DATA") or str(ROOT.parent / "shared" / "data")
    recipe = load_recipe(str(RECIPE), data_root=root)
    overrides = variant_overrides(recipe, variant)
    return load_recipe(str(RECIPE), overrides, data_root=root) if overrides else recipe


def variant_dir(recipe: Any, variant: str) -> Path:
    return run_dir(recipe.name) if variant == DEFAULT_VARIANT else run_dir(recipe.name) / variant


def step_train(recipe: Any, variant: str) -> dict[str, Any]:
    from vista_distill.train.model_card import SUMMARY_NAME
    from vista_distill.train.run import stage_output_dir

    out: dict[str, Any] = {}
    for stage, epochs in VARIANTS[variant]["epochs"].items():
        folder = stage_output_dir(recipe, stage)
        summary = folder / SUMMARY_NAME
        if not summary.exists():
            cli("train", "--config", str(RECIPE), "--stage", stage, "--train.num_train_epochs", str(epochs),
                *variant_overrides(recipe, variant), log=variant_dir(recipe, variant) / f"train_{stage}.log")
        out[stage] = json.loads(summary.read_text())
    return out


def _heldout_silver(recipe: Any) -> Path:
    """Silver data of the held-out claim material (labels teacher, nothing filtered, no split)."""
    import copy

    from vista_distill.config import DataSource
    from vista_distill.distill.run import run_distill

    out = run_dir(recipe.name) / "heldout_silver"
    if (out / "manifest.json").exists():
        return out
    r = copy.deepcopy(recipe)
    r.name = f"{recipe.name}-heldout"
    r.data.train = [DataSource(benchmark="file", source=str(run_dir(recipe.name) / "heldout" / f"{g}.jsonl"))
                    for g in CLAIM_GROUPS]
    r.data.test, r.data.test_fraction = [], 0.0
    r.distill.output_dir = str(out)
    r.distill.validation_fraction = 0.0
    run_distill(r)
    return out


def step_claims(recipe: Any, threads: int) -> dict[str, Any]:
    """Stage 2 and 3 labels of every held-out human claim: student vs base, McNemar."""
    import torch
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.protocol import Request
    from vista_distill.pipeline.templates import build_messages, get_template
    from vista_distill.scoring.significance import paired_mcnemar
    from vista_distill.train.run import stage_output_dir
    from vista_distill.train.silver_data import load_silver

    torch.set_num_threads(threads)
    silver = _heldout_silver(recipe)
    benchmark_of = {c.id: g for g in CLAIM_GROUPS
                    for c in read_conversations(run_dir(recipe.name) / "heldout" / f"{g}.jsonl")}
    adapters = {s: str(stage_output_dir(recipe, s)) for s in ("stage2", "stage3")}
    backend = TransformersBackend(None, adapters=adapters, batch_size=recipe.eval.batch_size)
    out: dict[str, Any] = {"silver": str(silver.relative_to(ROOT))}
    for stage in ("stage2", "stage3"):
        rows = load_silver(silver, stage)["train"]
        gold = list(rows["label"])
        group = [benchmark_of[cid] for cid in rows["conversation_id"]]
        target = [r[-1]["content"] for r in rows["prompt"]]
        compact, fewshot = get_template(stage, "compact"), get_template(stage, "fewshot")
        requests = {
            "student": [Request(stage, tuple(r), labels=compact.labels) for r in rows["prompt"]],
            # stage4 has no adapter: the same loaded model answers as the bare base model
            "base_compact": [Request("stage4", tuple(r), labels=compact.labels) for r in rows["prompt"]],
            "base_fewshot": [Request("stage4", tuple(build_messages(fewshot, t)), labels=fewshot.labels)
                             for t in target],
        }
        preds: dict[str, list[str]] = {}
        seconds: dict[str, float] = {}
        for system, reqs in requests.items():
            t = time.perf_counter()
            preds[system] = [r.label or "(none)" for r in backend.run(reqs)]
            seconds[system] = time.perf_counter() - t
        per_group: dict[str, Any] = {}
        for g in [*sorted(set(group)), "overall"]:
            idx = [i for i, x in enumerate(group) if g == "overall" or x == g]
            y = [gold[i] for i in idx]
            entry: dict[str, Any] = {"claims": len(idx), "gold": dict(Counter(y)),
                                     "majority_accuracy": Counter(y).most_common(1)[0][1] / len(y)}
            for system in requests:
                p = [preds[system][i] for i in idx]
                entry[system] = {"accuracy": accuracy_score(y, p),
                                 "macro_f1": f1_score(y, p, labels=sorted(set(y)), average="macro", zero_division=0),
                                 "balanced_accuracy": balanced_accuracy_score(y, p), "predicted": dict(Counter(p))}
            for base in ("base_fewshot", "base_compact"):
                entry[f"mcnemar_student_vs_{base}"] = paired_mcnemar(
                    [preds["student"][i] == gold[i] for i in idx], [preds[base][i] == gold[i] for i in idx])
            per_group[g] = entry
        out[stage] = {"groups": per_group, "seconds": seconds}
    return out


def step_pipeline(recipe: Any, variant: str, jobs: int, groups: list[str]) -> dict[str, Any]:
    """``vista-distill eval`` per held-out benchmark; ``jobs`` evaluations at a time (one thread each)."""
    from concurrent.futures import ThreadPoolExecutor

    vdir = variant_dir(recipe, variant)

    def one(group: str) -> None:
        src = run_dir(recipe.name) / "heldout" / f"{group}.pipeline.jsonl"
        dest = vdir / f"eval_{group}"
        if not (dest / "results.json").exists():
            cli("eval", "--config", str(RECIPE), "--input", str(src), "--output-dir", str(dest), "--no-progress",
                *variant_overrides(recipe, variant), log=vdir / f"eval_{group}.log")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, groups))
    # every group finished so far (another invocation may be evaluating the others)
    return {g: json.loads((vdir / f"eval_{g}" / "results.json").read_text()) for g in PIPELINE_GROUPS
            if (vdir / f"eval_{g}" / "results.json").exists()}


# -- report --------------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    """bench/harness.py's machine record, with the core count and versions this report also names."""
    import platform

    import torch

    return {**harness.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _p(test: dict[str, Any] | None) -> str:
    if not test or test.get("pvalue") is None:
        return "n/a"
    return f"{test['pvalue']:.3g} (b={test['b']}, c={test['c']})"


def _turn_row(group: str, res: dict[str, Any], rule: str) -> list[str]:
    m = {s: res["metrics"][s]["overall"]["turn"][rule] for s in ("student", "base")}
    sig = next(t for t in res["significance"]["by_rule"][rule]["overall"]
               if {t["system_1"], t["system_2"]} == {"student", "base"})
    maj = res.get("majority", {}).get("overall", {}).get("turn", {})
    return [group, str(m["student"]["n_gold"]), _pct(m["student"]["accuracy"]), _pct(m["base"]["accuracy"]),
            _pct(maj.get("accuracy")), f"{m['student']['coverage']:.2f} / {m['base']['coverage']:.2f}", _p(sig)]


def _pooled_row(pipeline: dict[str, Any], rule: str) -> list[str]:
    """All held-out turns together: accuracies weighted by gold turns, McNemar on the summed b and c."""
    from vista_distill.scoring.significance import mcnemar_test

    n, b, c = 0, 0, 0
    acc = {"student": 0.0, "base": 0.0, "majority": 0.0}
    for res in pipeline.values():
        m = {s: res["metrics"][s]["overall"]["turn"][rule] for s in ("student", "base")}
        k = m["student"]["n_gold"]
        n += k
        for s in ("student", "base"):
            acc[s] += (m[s]["accuracy"] or 0) * k
        acc["majority"] += res["majority"]["overall"]["turn"]["accuracy"] * k
        sig = next(t for t in res["significance"]["by_rule"][rule]["overall"]
                   if {t["system_1"], t["system_2"]} == {"student", "base"})
        b, c = b + sig["b"], c + sig["c"]
    test = {**mcnemar_test(b, c), "b": b, "c": c}
    return ["**all held out**", str(n), *(_pct(acc[s] / n) for s in ("student", "base", "majority")), "", _p(test)]


def write_report(name: str, variant: str, material: dict, train: dict, claims: dict, pipeline: dict) -> str:
    from vista_distill.eval.report import markdown_table as table

    lines = ["# Local distillation experiment: SmolLM2-135M student vs the prompted base model", "",
             f"Recipe `recipes/experiment-135m-cpu.yaml`, variant `{variant}` "
             f"({json.dumps(VARIANTS[variant])}); produced by "
             f"`python bench/experiment_135m_cpu.py --variant {variant}`. "
             f"Machine: {json.dumps(machine())}.", "",
             "## Material", "",
             "Teacher = the human labels (no model). Train material (conversations): "
             f"{material['train_conversations']}. Held out (never distilled, never trained on):", "",
             table(["benchmark", "conversations", "scored turns", "human claims", "in the pipeline eval"],
                   [[g, e["conversations"], e["scored_turns"], e["human_claims"], e.get("pipeline_conversations", "-")]
                    for g, e in material["heldout"].items()])]
    rows = []
    for stage, s in train.items():
        r = s["results"]
        rows.append([stage, s["silver"]["train_examples"], s["hyperparameters"]["num_train_epochs"], r["global_step"],
                     f"{r['train_runtime_s']:.0f}", r["train_tokens"],
                     f"{r['first_eval_loss'] or float('nan'):.3f} -> {r['final_eval_loss'] or float('nan'):.3f}"])
    total = sum(s["results"]["train_runtime_s"] for s in train.values())
    runs_log = run_dir(name) / "silver" / "runs.jsonl"
    last = json.loads(runs_log.read_text().splitlines()[-1]) if runs_log.exists() else {}
    lines += [
        "",
        "## Training cost",
        "",
        table(["stage", "examples", "epochs", "steps", "seconds", "train tokens", "eval loss first -> last"], rows),
        "",
        f"Training: {total / 60:.1f} min summed over the stages, one CPU thread each (bf16, LoRA r=16 on all "
        f"linear layers, {next(iter(train.values()))['hyperparameters']['trainable_params']:,} trainable "
        "parameters per stage).",
        "",
        f"Distillation (labels teacher, no model calls): {last.get('requests', '?')} pipeline requests "
        f"answered from the human labels in {last.get('wall_s', '?')} s (teacher time; loading and export "
        "take about a second more).",
        "",
        "## Claim level, human claims given (stages 2 and 3 in isolation)",
        "",
        "Each held-out human claim is labelled by likelihood over the stage's labels. Stage 2 gold: "
        "VERIFIED vs UNVERIFIABLE; stage 3 gold: the category of the claims humans did not verify.",
        "",
    ]
    for stage in ("stage2", "stage3"):
        groups = claims[stage]["groups"]
        rows = [[g, e["claims"], *(f"{_pct(e[s]['accuracy'])} / {e[s]['macro_f1']:.3f}" for s in SYSTEMS),
                 _pct(e["majority_accuracy"]), _p(e["mcnemar_student_vs_base_fewshot"]),
                 _p(e["mcnemar_student_vs_base_compact"])] for g, e in groups.items()]
        lines += [f"### {stage}", "",
                  table(["held out", "claims", *(f"{s} acc / macro-F1" for s in SYSTEMS), "majority acc",
                         "McNemar p student vs base_fewshot", "vs base_compact"], rows),
                  "", "Predicted labels (overall): " + "; ".join(f"{s} {groups['overall'][s]['predicted']}"
                                                                for s in SYSTEMS)
                  + ". Seconds: " + ", ".join(f"{s} {v:.0f}" for s, v in claims[stage]["seconds"].items()) + ".", ""]
    lines += ["## Whole pipeline on held-out turns (`vista-distill eval`, student vs few-shot base)", ""]
    for rule in ("safe", "strict"):
        rows = [_turn_row(g, res, rule) for g, res in pipeline.items()] + [_pooled_row(pipeline, rule)]
        lines += [f"Turn accuracy, {rule} rule (% of turns with a gold label; unknown verdicts are left out of "
                  "accuracy, see coverage; McNemar counts unknown as wrong):", "",
                  table(["held out", "gold turns", "student", "base", "majority", "coverage student / base",
                         "McNemar p"], rows), ""]
    vista = pipeline.get("vista-human")
    if vista:
        rows = []
        for s in ("student", "base"):
            c = vista["metrics"][s]["overall"].get("claim") or {}
            rows.append([s, f"{_pct(c.get('human_claims_matched'))}%", _pct(c.get("accuracy")),
                         f"{c.get('macro_f1', float('nan')):.3f}", _pct(c.get("binary_accuracy"))])
        lines += ["Matched-claim level on the held-out VISTA human turns (predicted claims matched to human claims):",
                  "", table(["system", "claims matched", "claim accuracy (5 labels)", "macro-F1",
                             "binary VERIFIED accuracy"], rows), ""]
    rows = []
    for g, res in pipeline.items():
        for s in ("student", "base"):
            e = res["systems"][s].get("efficiency") or {}
            n = max(e.get("scored_turns") or 0, 1)
            rows.append([g, s, f"{e.get('wall_s', 0):.0f}", f"{e.get('wall_s', 0) / n:.2f}",
                         f"{e.get('prompt_tokens', 0) / n:.0f}", f"{e.get('completion_tokens', 0) / n:.0f}"])
    lines += ["Scoring cost (this CPU, one torch thread, bf16):", "",
              table(["held out", "system", "seconds", "s / turn", "prompt tokens / turn", "generated tokens / turn"],
                    rows)]
    return "\n".join(lines) + "\n"


def plot(pipeline: dict, claims: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups = list(pipeline)
    for k, s in enumerate(("student", "base")):
        acc = [pipeline[g]["metrics"][s]["overall"]["turn"]["safe"]["accuracy"] or 0 for g in groups]
        axes[0].bar([i + 0.38 * k for i in range(len(groups))], acc, 0.38, label=s)
    maj = [pipeline[g]["majority"]["overall"]["turn"]["accuracy"] for g in groups]
    axes[0].hlines(maj, [i - 0.19 for i in range(len(groups))], [i + 0.57 for i in range(len(groups))],
                   colors="black", linestyles="dashed", label="majority label")
    axes[0].set_xticks([i + 0.19 for i in range(len(groups))], groups)
    axes[0].set_ylabel("turn accuracy (safe rule)")
    axes[0].set_title("whole pipeline, held-out turns")
    axes[0].set_ylim(0, 1.05)
    axes[0].legend(loc="upper center", ncol=3, fontsize="small")
    cg = list(claims["stage2"]["groups"])
    for k, s in enumerate(SYSTEMS):
        acc = [claims["stage2"]["groups"][g][s]["macro_f1"] for g in cg]
        axes[1].bar([i + 0.27 * k for i in range(len(cg))], acc, 0.27, label=s)
    axes[1].set_xticks([i + 0.27 for i in range(len(cg))], cg)
    axes[1].set_ylabel("stage 2 macro-F1")
    axes[1].set_title("stage 2 on held-out human claims")
    axes[1].set_ylim(0, 1.05)
    axes[1].legend(loc="upper center", ncol=3, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pipeline-n", type=int, default=60, help="conversations per benchmark in the pipeline eval")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--jobs", type=int, default=1, help="pipeline evaluations run at a time (one thread each)")
    ap.add_argument("--groups", default=",".join(PIPELINE_GROUPS),
                    help="held-out benchmarks to evaluate first, in this order (all must exist for the report)")
    ap.add_argument("--variant", default=DEFAULT_VARIANT, choices=sorted(VARIANTS),
                    help="training variant (epochs per stage, class balance)")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))

    recipe = variant_recipe(a.variant)
    vdir = variant_dir(recipe, a.variant)
    vdir.mkdir(parents=True, exist_ok=True)
    dest = DEST / a.variant
    steps = a.steps.split(",")
    cache = vdir / "experiment.json"
    state = json.loads(cache.read_text()) if cache.exists() else {}

    def save(step: str) -> None:   # merge: another invocation may be running other steps meanwhile
        on_disk = json.loads(cache.read_text()) if cache.exists() else {}
        if step in state:
            on_disk[step] = state[step]
        state.update(on_disk)
        cache.write_text(json.dumps(on_disk, indent=2, default=str))

    for step in steps:
        t = time.perf_counter()
        print(f"[experiment] {step} ...", flush=True)
        if step == "material":
            state["material"] = step_material(recipe, a.pipeline_n, recipe.data.seed)
        elif step == "distill":
            if not (run_dir(recipe.name) / "silver" / "manifest.json").exists():
                record_time(recipe.name, "distill", cli("distill", "--config", str(RECIPE),
                                                        log=run_dir(recipe.name) / "distill.log"))
        elif step == "train":
            state["train"] = step_train(recipe, a.variant)
        elif step == "claims":
            state["claims"] = step_claims(recipe, a.threads)
        elif step == "pipeline":
            state["pipeline"] = step_pipeline(recipe, a.variant, a.jobs, a.groups.split(","))
        elif step == "report":
            state.update(json.loads(cache.read_text()) if cache.exists() else {})
            dest.mkdir(parents=True, exist_ok=True)
            report = write_report(recipe.name, a.variant, state["material"], state["train"], state["claims"],
                                  state["pipeline"])
            (dest / "report.md").write_text(report)
            plot(state["pipeline"], state["claims"], dest / "turn_accuracy.png")
            slim = {k: v for k, v in state.items() if k != "pipeline"}
            slim["pipeline"] = {g: {"metrics": {s: r["metrics"][s]["overall"] for s in ("student", "base")},
                                    "efficiency": {s: r["systems"][s].get("efficiency") for s in ("student", "base")},
                                    "majority": r["majority"]["overall"],
                                    "significance": {rule: r["significance"]["by_rule"][rule]["overall"]
                                                     for rule in r["significance"]["by_rule"]}}
                                for g, r in state["pipeline"].items()}
            (dest / "results.json").write_text(json.dumps(slim, indent=2, default=str))
            print(report)
        else:
            raise SystemExit(f"unknown step {step!r}; steps: {', '.join(STEPS)}")
        if step != "report":
            record_time(recipe.name, step if step != "distill" else "distill_step", time.perf_counter() - t)
        save(step)


if __name__ == "__main__":
    main()
