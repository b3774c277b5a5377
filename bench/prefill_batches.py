"""Label-scoring batches cut by padded prompt tokens (``TransformersBackend(prefill_tokens=...)``) against whole
``batch_size`` batches, on a CPU: stages 2-3 of the demo's student on the human claims of training conversations
(FaithDial, human responses: the test's kind, not the test), each budget twice, interleaved.

    python bench/prefill_batches.py --run /path/to/vista-distill/runs/demo-cpu --tag 7661a8b

Writes bench/results/prefill_batches/<cpu>_<date>_<tag>.json and .md."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

OUT = ROOT / "bench" / "results" / "prefill_batches"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="a demo run folder (silver/, checkpoints/)")
    ap.add_argument("--conversations", type=int, default=48)
    ap.add_argument("--budgets", default="none,1024,2048,3072")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tag", default="demo")
    a = ap.parse_args()
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.config import load_recipe
    from vista_distill.data.material import load_material
    from vista_distill.scoring.run import run_given_claims

    m = harness.machine()
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml", [f"distill.output_dir={a.run / 'silver'}",
                                                              f"train.output_dir={a.run / 'checkpoints'}"])
    convs = [c for c in load_material(recipe).train if c.id.startswith("FaithDial-audit-gold")
             and any(c.turns[i].gold_claims for i in c.scored_turns)][:a.conversations]
    cfg = recipe.engine_config("student")
    be = TransformersBackend(recipe.student.model, adapters={s: a.run / "checkpoints" / s for s in ("stage1", "stage2", "stage3")},
                             dtype=recipe.student.dtype, batch_size=recipe.eval.batch_size, threads="auto")
    budgets = [None if b == "none" else int(b) for b in a.budgets.split(",")]
    walls: dict[str, list[float]] = {}
    labels: dict[str, list] = {}
    for _ in range(a.repeats):
        for b in budgets:
            be.prefill_tokens = b
            t0 = time.perf_counter()
            recs, _ = run_given_claims(convs, cfg, be, evidence_seed=None)
            walls.setdefault(str(b), []).append(round(time.perf_counter() - t0, 1))
            labels[str(b)] = [(c.get("stage2") or {}).get("label") for r in recs if r["scored"] for c in r["claims"]] + \
                [c.get("category") for r in recs if r["scored"] for c in r["claims"]]
            print(b, walls[str(b)][-1], flush=True)
    ref = labels["None"]
    out = {"machine": m, "commit": harness.commit(), "run": str(a.run), "conversations": len(convs),
           "claims": len(ref) // 2, "batch_size": recipe.eval.batch_size, "wall_s": walls,
           "labels_differing_from_unbudgeted": {k: sum(x != y for x, y in zip(v, ref)) for k, v in labels.items()}}
    path = harness.save(OUT, harness.dated_name(m, a.tag), out)
    lines = [f"# {a.tag}: label-scoring batches cut by padded prompt tokens", "",
             harness.header(m, f"the demo's student (`{a.run}`) on the human claims of {len(convs)} FaithDial training "
                            f"conversations ({out['claims']} claims; stages 2-3, evidence head, no probes), batch_size "
                            f"{out['batch_size']}. Command: `python bench/prefill_batches.py --run {a.run} --tag {a.tag}`."), "",
             "| prefill_tokens | wall s (each repeat) | stage-2 labels and categories differing from no budget |",
             "| --- | --- | ---: |"]
    lines += [f"| {k} | {', '.join(map(str, v))} | {out['labels_differing_from_unbudgeted'][k]} |" for k, v in walls.items()]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(path.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
