"""results.json's ``tuned``: each system with a stage 2 threshold reported two ways, as FactCG reports its
verifier: **fixed** (the label as the system gives it: the student's and pmi's fitted head, the overlap rule's
half) and **tuned** (the P(VERIFIED) cut-off that is most accurate on a labelled dev split of the test's benchmark,
``eval.tune_on``, swept over 0.01-0.99). Both are stage 2 accuracy on the test's human claims (``eval.given_claims``),
McNemar pairing them; the dev split is never the test (a dev dialogue that shares a dialogue or a reference with
the test is left out).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Recipe
from ..data.material import load_source
from ..data.schema import CLAIM_CATEGORIES, VERIFIED, Conversation
from ..scoring.significance import paired_mcnemar
from .errors import EvalError
from .result_parts import McNemarPair
from .results import Results
from .systems import ModelLoader, SystemRun, run_system

log = logging.getLogger(__name__)

TUNABLE = ("student", "pmi", "overlap")


def claim_scores(records: Sequence[dict[str, Any]]) -> list[tuple[bool, float, bool]]:
    """(human label VERIFIED?, the system's P(VERIFIED), its label VERIFIED?) per human claim of a given-claims run
    that has a stage 2 probability."""
    return list(_keyed_scores(records).values())


def _keyed_scores(records: Sequence[dict[str, Any]]) -> dict[tuple[str, int, int], tuple[bool, float, bool]]:
    """:func:`claim_scores` keyed by (conversation, turn, claim), to pair two systems' claims."""
    out = {}
    for r in records:
        if not (r.get("scored") and r.get("gold_claims")):
            continue
        for k, (gold, claim) in enumerate(zip(r["gold_claims"], r["claims"])):
            pv = ((claim.get("stage2") or {}).get("probs") or {}).get(VERIFIED)
            if gold["label"] in CLAIM_CATEGORIES and pv is not None:
                key = (str(r.get("conversation_id")), int(r.get("turn_index", 0)), k)
                out[key] = (gold["label"] == VERIFIED, float(pv), claim.get("category") == VERIFIED)
    return out


def choose_threshold(scores: Sequence[tuple[bool, float, bool]]) -> tuple[float, float]:
    """The cut-off most accurate on ``scores`` (``scoring.calibrate.tuned_threshold``: P(VERIFIED) above it is
    VERIFIED) and that accuracy."""
    import numpy as np

    from ..scoring.calibrate import tuned_threshold

    if not scores:
        raise ValueError("no scored claims to tune a threshold on")
    y = np.array([g for g, _, _ in scores])
    p = np.array([v for _, v, _ in scores])
    t = tuned_threshold(p, y)
    return t, float(((p > t) == y).mean())


def check_apart(dev: Sequence[Conversation], test: Sequence[Conversation]) -> list[Conversation]:
    """The dev dialogues that share no dialogue and no reference with the test material (the others are left out,
    as the distillation's split leaves them out); refused when none is left."""
    ids = {c.id for c in test}
    refs = {t.reference for c in test for t in c.turns if t.reference}
    shared = [c.id for c in dev if c.id in ids or any(t.reference in refs for t in c.turns if t.reference)]
    if len(shared) == len(dev):
        raise EvalError(f"eval.tune_on shares {len(shared)} dialogue(s) or their references with the test material "
                        f"(first: {shared[0] if shared else None}): tune on the benchmark's dev split, never on its "
                        "test")
    if shared:
        log.warning("eval.tune_on: %d of %d dev dialogues share a dialogue or a reference with the test material "
                    "and are left out (first: %s)", len(shared), len(dev), shared[0])
    out = set(shared)
    return [c for c in dev if c.id not in out]


def tuning_runs(recipe: Recipe, order: list[str], test: list[Conversation], backends: ModelLoader,
                out_dir: Path) -> tuple[dict[str, SystemRun], dict[str, Any]]:
    """Stage 2 of each tunable system on the human claims of the dev split (``eval.tune_on``): claim level only,
    no probes; nothing without it. It runs before the test's rounds, so a time budget counts it."""
    e = recipe.eval
    if not e.tune_on:
        return {}, {}
    dev: list[Conversation] = []
    reports = []
    for src in e.tune_on:
        convs, report = load_source(src, recipe.data.root)
        dev += convs
        reports.append(report)
    kept = check_apart(dev, test)
    left_out = len(dev) - len(kept)
    dev = kept
    claim_level = dataclasses.replace(recipe, eval=dataclasses.replace(e, evidence=False))
    out = {}
    for name in order:
        if name in TUNABLE:
            log.info("eval: %s on the dev split's human claims (eval.tune_on: %d dialogues)", name, len(dev))
            out[name] = run_system(name, claim_level, [], backends, out_dir, progress=False, given=dev,
                                   reference_probes=set())   # no bars: the closing summary stays within 80 lines
    return out, {"sources": reports, "conversations": len(dev), "left_out_shared_with_test": left_out}


def tuned_section(test_runs: dict[str, SystemRun], dev_runs: dict[str, SystemRun], dev_info: dict[str, Any],
                  variant: str) -> dict[str, Any]:
    """Per tunable system: the tuned cut-off and its dev accuracy, and on the test's human claims the fixed and tuned
    stage 2 accuracy with McNemar."""
    systems: dict[str, Any] = {}
    tuned_correct: dict[str, dict[tuple[str, int, int], bool]] = {}
    for name, dev in dev_runs.items():
        if name not in test_runs:
            continue
        dev_scores = claim_scores(dev.given_records)
        keyed = _keyed_scores(test_runs[name].given_records)
        test_scores = list(keyed.values())
        if not dev_scores or not test_scores:
            systems[name] = {"reason": "no human claim with a stage 2 probability on the "
                                       + ("dev split" if not dev_scores else "test")}
            continue
        t, dev_acc = choose_threshold(dev_scores)
        fixed = [lab == g for g, _, lab in test_scores]
        tuned = [(p > t) == g for g, p, _ in test_scores]
        tuned_correct[name] = dict(zip(keyed, tuned))
        res = paired_mcnemar(tuned, fixed, variant)
        systems[name] = {"threshold": t, "dev_claims": len(dev_scores), "dev_accuracy_tuned": dev_acc,
                         "dev_accuracy_fixed": sum(lab == g for g, _, lab in dev_scores) / len(dev_scores),
                         "test_claims": len(test_scores), "fixed": res["accuracy_1"] - res["delta"],
                         "tuned": res["accuracy_1"], "delta": res["delta"], "pvalue": res["pvalue"],
                         "b": res["b"], "c": res["c"]}
    return {"method": "stage 2 cut-off on P(VERIFIED) most accurate on the dev split (0.01-0.99; ties nearest 0.5), "
                      "applied to the test's human claims; fixed = the label as the system gives it",
            "dev": dev_info, "systems": systems, "student_vs_tuned": _student_pairs(tuned_correct, variant)}


def _student_pairs(tuned_correct: dict[str, dict[tuple[str, int, int], bool]], variant: str) -> list[dict[str, Any]]:
    """The tuned student against each other tuned system, McNemar over the human claims both scored."""
    mine = tuned_correct.get("student")
    out = []
    for name, theirs in tuned_correct.items():
        if name == "student" or mine is None:
            continue
        keys = sorted(mine.keys() & theirs.keys())
        res = paired_mcnemar([mine[k] for k in keys], [theirs[k] for k in keys], variant)
        out.append({"system_1": "student", "system_2": name, "n": res["n"], "delta": res.get("delta"),
                    "pvalue": res["pvalue"], "b": res["b"], "c": res["c"]})
    return out


def tuned_markdown(results: Results | Mapping[str, Any]) -> list[str]:
    """report.md's section: fixed and tuned side by side."""
    from .report_format import _percent, _pvalue, markdown_table

    section = Results.of(results).tuned
    if not section:
        return []
    rows = [[n, s.reason] if s.reason is not None else
            [n, f"{s.threshold:.2f}", s.dev_claims, _percent(s.dev_accuracy_fixed), _percent(s.dev_accuracy_tuned),
             s.test_claims, _percent(s.fixed), _percent(s.tuned), _pvalue(s.pvalue)]
            for n, s in section.systems.items()]
    sources = ", ".join(str(s.get("source")) for s in section.dev.sources or [])
    return ["## Stage 2 fixed and tuned (threshold tuned on the dev split)", "",
            f"Dev split: {sources} ({section.dev.conversations} dialogues). {section.method}.", "",
            markdown_table(["system", "tuned cut-off", "dev claims", "dev fixed", "dev tuned", "test claims",
                            "test fixed", "test tuned", "p (McNemar)"], rows), "",
            *_pairs_markdown(section.student_vs_tuned or [])]


def _pairs_markdown(pairs: list[McNemarPair]) -> list[str]:
    from .report_format import _percent, _pvalue, markdown_table

    if not pairs:
        return []
    rows = [[p.system_2, p.n, _percent(p.delta, signed=True, missing="-"), _pvalue(p.pvalue)] for p in pairs]
    return ["Both tuned: the student against each rule on the same human claims.", "",
            markdown_table(["other (tuned)", "claims", "student - other (points)", "p (McNemar)"], rows), ""]


__all__ = [
    "TUNABLE",
    "check_apart",
    "choose_threshold",
    "claim_scores",
    "tuned_markdown",
    "tuned_section",
    "tuning_runs",
]
