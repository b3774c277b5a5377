"""How far the signals the demo's student has can go past the overlap rule, judged on training material only.

The demo's test claims are human FaithDial responses (``data/samples/faithdial_balanced_sample.jsonl``, the half not
held out). The other half of that file is training material: its rows in the silver stage-2 data look like the test
and are not the test. This script reads them and the rest of the dialogue rows (FaithDial, BEGIN, FADE) of a demo
run's silver stage-2 split, and measures, with cross-validation on those rows only:

1. each candidate signal of the base model (no adapter): the claim's word overlap with its reference (the overlap
   rule's own signal), the claim's PMI with the reference (PMI-Faith, mean over its tokens), token-level PMI
   statistics, the claim's likelihood, the smallest per-sentence overlap, the claim's length;
2. heads fitted on all dialogue rows against heads fitted on the test-like rows, scored on the test-like rows;
3. with ``--cross-fit``: a stage-2 adapter trained as the demo trains it but *without* the test-like rows (so its
   label margin and its own PMI are honest there), and the head's parts on those rows: adapter alone, adapter PMI
   against the base model's PMI, every combination.

    python bench/evidence_ceiling.py --run /path/to/vista-distill/runs/demo-cpu --cross-fit --tag 7661a8b

Writes bench/results/evidence_ceiling/<cpu>_<date>_<tag>.json and .md (the adapter goes to /tmp/evidence-ceiling/)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

OUT = ROOT / "bench" / "results" / "evidence_ceiling"
WORK = Path("/tmp/evidence-ceiling")
DIALOGUE = ("FaithDial", "BEGIN", "FADE")
TEST_LIKE = ROOT / "data" / "samples" / "faithdial_balanced_sample.jsonl"


def _claim_logprobs(model, tok, messages: list[dict[str, str]], claim: str) -> list[float]:
    """Each claim token's log-probability at the end of the rendered stage-2 prompt (one forward)."""
    import torch

    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    at = text.rfind(claim)
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    ids = enc["input_ids"]
    span = [k for k, (a, b) in enumerate(enc["offset_mapping"]) if a >= at and b <= at + len(claim) and b > a]
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return [lp[k - 1, ids[k]].item() for k in span]


def base_features(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """The base model's candidate signals for each silver row."""
    import numpy as np

    from vista_distill.backends.evidence_head import _REFERENCE, claim_and_twin
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.pipeline.evidence import content_words, coverage

    be = TransformersBackend(None, dtype="auto", batch_size=1)
    out = []
    t0 = time.perf_counter()
    for n, r in enumerate(rows):
        msgs = [{"role": m["role"], "content": m["content"]} for m in r["prompt"]]
        claim, twin = claim_and_twin(msgs[-1]["content"])
        ref = _REFERENCE.search(msgs[-1]["content"]).group(2)
        own = np.array(_claim_logprobs(be.model, be.tokenizer, msgs, claim))
        bare = np.array(_claim_logprobs(be.model, be.tokenizer, [*msgs[:-1], {**msgs[-1], "content": twin}], claim))
        pmi = own - bare
        sents = [s for s in re.split(r"(?<=[.!?])\s+", claim) if len(content_words(s)) >= 2 and not s.endswith("?")]
        out.append({"overlap": coverage(claim, ref) or 0.0,
                    "min_sentence_overlap": min([coverage(s, ref) or 0.0 for s in sents] or [coverage(claim, ref) or 0.0]),
                    "pmi": float(pmi.mean()), "pmi_min": float(pmi.min()), "pmi_share_positive": float((pmi > 0).mean()),
                    "likelihood": float(own.mean()), "log_tokens": float(np.log(len(pmi)))})
        if n % 100 == 0:
            print(f"base features {n}/{len(rows)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def cv_accuracy(X, y, fit_mask, eval_mask, seeds: int = 10) -> tuple[float, float]:
    """Accuracy on the ``eval_mask`` rows of a logistic head fitted on the ``fit_mask`` rows, 5-fold over the
    evaluated rows (a fold's rows never in its fit), mean and std over ``seeds`` shuffles."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    ev = np.where(eval_mask)[0]
    accs = []
    for seed in range(seeds):
        ok = 0
        for _, held in StratifiedKFold(5, shuffle=True, random_state=seed).split(ev, y[ev]):
            fit_idx = np.setdiff1d(np.where(fit_mask)[0], ev[held])
            ok += (LogisticRegression(max_iter=1000).fit(X[fit_idx], y[fit_idx]).predict(X[ev[held]]) == y[ev[held]]).sum()
        accs.append(ok / len(ev))
    return float(np.mean(accs)), float(np.std(accs))


def cross_fit_adapter(run: Path, test_like: set[str], rows: list[dict[str, Any]]) -> tuple[list[dict[str, float]], dict]:
    """Train stage 2 as the demo does on the run's silver data less the test-like rows; its label margin and its own
    PMI on each of ``rows`` (the test-like ones)."""
    from datasets import DatasetDict, load_from_disk

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.config import load_recipe
    from vista_distill.pipeline.protocol import Request
    from vista_distill.pipeline.templates import get_template
    from vista_distill.train.run import train_stage

    silver = WORK / "silver"
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.copytree(run / "silver", silver)
    dd = load_from_disk(str(run / "silver" / "stage2"))
    kept = dd["train"].filter(lambda r: r["conversation_id"] not in test_like)   # contrast rows share the id
    shutil.rmtree(silver / "stage2")
    DatasetDict({"train": kept, "validation": dd["validation"]}).save_to_disk(str(silver / "stage2"))
    recipe = load_recipe(ROOT / "recipes" / "demo-cpu.yaml", [f"distill.output_dir={silver}",
                                                              f"train.output_dir={WORK / 'checkpoints'}"])
    summary = train_stage(recipe, "stage2")
    be = TransformersBackend(None, adapters={"stage2": WORK / "checkpoints" / "stage2"}, dtype="auto", batch_size=16,
                             evidence_features=True)
    be.heads.pop("stage2", None)
    labels = get_template("stage2", "compact").labels
    out = be.run([Request("stage2", tuple({"role": m["role"], "content": m["content"]} for m in r["prompt"]),
                          labels=labels, max_new_tokens=8) for r in rows])
    trained = {"train_rows": len(dd["train"]), "train_rows_kept": len(kept),
               "steps": summary["results"]["global_step"], "time_budget": summary.get("time_budget")}
    return [{"margin": o.meta["evidence"]["margin"], "pmi_adapter": o.meta["evidence"]["pmi"]} for o in out], trained


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="a demo run folder (silver/)")
    ap.add_argument("--cross-fit", action="store_true", help="also train the cross-fitted stage-2 adapter (~7 min)")
    ap.add_argument("--tag", default="demo")
    a = ap.parse_args()
    import numpy as np
    from datasets import load_from_disk

    m = harness.machine()
    t0 = time.perf_counter()
    dd = load_from_disk(str(a.run / "silver" / "stage2"))
    rows = [{**r, "split": s} for s in ("train", "validation") for r in dd[s] if r["source"] in DIALOGUE]
    test_like = {json.loads(line)["id"] for line in TEST_LIKE.open(encoding="utf-8")}
    feats = base_features(rows)
    y = np.array([int(r["label"] == "VERIFIED") for r in rows])
    like = np.array([r["conversation_id"] in test_like for r in rows])
    every = np.ones(len(rows), bool)
    names = list(feats[0])
    X = {n: np.array([[f[n]] for f in feats]) for n in names}
    cols = lambda *ns: np.hstack([X[n] for n in ns])  # noqa: E731
    overlap_rule = lambda mask: float(((X["overlap"][mask, 0] >= 0.5) == y[mask]).mean())  # noqa: E731
    sets = [("overlap",), ("pmi",), ("overlap", "pmi"), ("overlap", "pmi", "min_sentence_overlap"),
            ("overlap", "pmi", "pmi_min"), ("overlap", "pmi", "pmi_share_positive"), ("overlap", "pmi", "likelihood"),
            ("overlap", "pmi", "log_tokens"), tuple(names)]
    out: dict[str, Any] = {
        "machine": m, "commit": harness.commit(), "run": str(a.run),
        "rows": {"dialogue": len(rows), "test_like": int(like.sum()), "verified_share": float(y.mean()),
                 "test_like_verified_share": float(y[like].mean())},
        "overlap_rule": {"dialogue": overlap_rule(every), "test_like": overlap_rule(like)},
        "base_heads": [{"features": list(s), "dialogue_cv": cv_accuracy(cols(*s), y, every, every),
                        "test_like_fit_on_dialogue": cv_accuracy(cols(*s), y, every, like),
                        "test_like_fit_on_test_like": cv_accuracy(cols(*s), y, like, like)} for s in sets]}
    if a.cross_fit:
        idx = np.where(like)[0]
        adapter, out["cross_fit_training"] = cross_fit_adapter(a.run, test_like, [rows[i] for i in idx])
        A = {"margin": np.array([[f["margin"]] for f in adapter]), "pmi_adapter": np.array([[f["pmi_adapter"]] for f in adapter]),
             "overlap": X["overlap"][idx], "pmi": X["pmi"][idx]}
        yl, allm = y[idx], np.ones(len(idx), bool)
        out["cross_fit"] = {"adapter_alone_margin_positive": float(((A["margin"][:, 0] > 0) == yl).mean()), "heads": [
            {"features": list(s), "test_like_cv": cv_accuracy(np.hstack([A[n] for n in s]), yl, allm, allm, seeds=20)}
            for s in [("margin",), ("overlap",), ("overlap", "pmi"), ("overlap", "pmi_adapter"), ("overlap", "margin"),
                      ("overlap", "pmi", "margin"), ("overlap", "pmi_adapter", "margin")]]}
    out["seconds"] = round(time.perf_counter() - t0)
    path = harness.save(OUT, harness.dated_name(m, a.tag), out)
    path.with_suffix(".md").write_text(render(out, a))
    print(path.with_suffix(".md").read_text())


def render(out: dict[str, Any], a: argparse.Namespace) -> str:
    pct = lambda v: f"{100 * v[0]:.1f} ± {100 * v[1]:.1f}"  # noqa: E731
    r = out["rows"]
    lines = [f"# {a.tag}: the evidence signals' ceiling over the overlap rule, on training material", "",
             harness.header(out["machine"], f"demo run `{a.run}`: {r['dialogue']} silver stage-2 dialogue rows "
                            f"(FaithDial, BEGIN, FADE; train and validation splits), {r['test_like']} of them test-like "
                            f"(human FaithDial responses of the balanced sample's training half). Command: "
                            f"`python bench/evidence_ceiling.py --run {a.run}{' --cross-fit' if a.cross_fit else ''} "
                            f"--tag {a.tag}`; {out['seconds']} s."), "",
             f"Overlap rule: {100 * out['overlap_rule']['dialogue']:.1f} on the dialogue rows, "
             f"**{100 * out['overlap_rule']['test_like']:.1f}** on the test-like rows.", "",
             "Base model (no adapter), logistic heads, accuracy (5-fold, mean ± std over 10 shuffles):", "",
             "| features | dialogue rows (CV) | test-like rows, head fitted on all dialogue rows | test-like rows, "
             "head fitted on test-like rows |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {', '.join(h['features'])} | {pct(h['dialogue_cv'])} | {pct(h['test_like_fit_on_dialogue'])} | "
              f"{pct(h['test_like_fit_on_test_like'])} |" for h in out["base_heads"]]
    if "cross_fit" in out:
        c, t = out["cross_fit"], out["cross_fit_training"]
        lines += ["", f"Cross-fitted stage-2 adapter (trained as the demo trains it on {t['train_rows_kept']} of "
                  f"{t['train_rows']} silver train rows, the test-like rows left out; {t['steps']} steps, "
                  f"{t['time_budget']}), on the test-like rows: adapter alone (margin > 0) "
                  f"**{100 * c['adapter_alone_margin_positive']:.1f}**.", "",
                  "| features (`pmi`: base model; `pmi_adapter`: through the adapter) | test-like rows (5-fold, 20 shuffles) |",
                  "| --- | ---: |"]
        lines += [f"| {', '.join(h['features'])} | {pct(h['test_like_cv'])} |" for h in c["heads"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
