"""Fitting a calibration (:mod:`..backends.calibration`) on a labelled dev file: the student's stages 2-3 on the
file's human claims, then per stage the candidates below compared by cross-validation over conversations (no
conversation is in the fold it is fitted on and the fold it is judged on), the best by pooled out-of-fold accuracy
refitted on the whole file. Ties keep the simpler candidate, so a calibration that does not help leaves training's.

* stage 2 (VERIFIED vs not, on every human claim): ``as trained`` (the adapter with the head training fitted);
  ``head refit`` (the logistic head on margin, PMI and word overlap, fitted on the dev claims, cut at 0.5);
  ``head refit + threshold`` (the same head, its cut tuned on the fitting folds over 0.01-0.99, as FactCG's
  ``--threshold-setting tune``). The rules: the overlap rule at 0.5 and with its cut tuned the same way.
* stage 3 (on the human-unverifiable claims the student's stage 2 sent to stage 3): ``as trained``; ``label shift``
  (a log-probability shift per label, coordinate ascent on the fitting folds: logit adjustment fitted on data).
  The rule: the stage 3 wording rule (``backends/cheap_baselines.py: wording_category``, nothing fitted).
* stage 1 (where the dev turns carry gold labels): turn accuracy of the whole pipeline, stages 2-3 as calibrated on
  the whole file, with the student's decomposition (``as trained``) and with the sentence splitter (the rule).
  Neither is fitted, but stages 2-3 were fitted on the same conversations: in-sample for both alike.

A rule takes a stage from the student only by the margin the file states (``rule_margin``): more accurate out of
fold than the best student candidate, and McNemar's exact test on the two's out-of-fold decisions below ``alpha``.
McNemar also compares the chosen candidate with training's; each stage keeps its confusion matrices before and after.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.calibration import Calibration, check_name
from ..backends.evidence_head import FEATURES, EvidenceHead, fit
from ..backends.label_prior import LabelPrior
from ..data.schema import STAGE3_LABELS, VERIFIED, Conversation
from ..runtime.numbers import percent

THRESHOLDS = np.round(np.arange(0.01, 1.0, 0.01), 2)
SHIFT_GRID = np.round(np.arange(-6.0, 6.01, 0.25), 2)
MIN_CLAIMS = 8   # per stage, with both outcomes present, or the stage keeps training's
MIN_TURNS = 8    # stage 1: gold turns both runs scored
RULE_ALPHA = 0.05   # a rule takes a stage only when McNemar's p against the best student candidate is below this


def dev_fingerprint(conversations: Sequence[Conversation], path: str | Path | None = None) -> dict[str, Any]:
    """What the calibration was fitted on: the file (when read from one), a SHA-256 of the conversations and its
    size."""
    blob = json.dumps([dataclasses.asdict(c) for c in conversations], sort_keys=True, ensure_ascii=False, default=str)
    claims = sum(len(c.turns[i].gold_claims or []) for c in conversations for i in c.scored_turns)
    return {"path": None if path is None else str(path), "sha256": hashlib.sha256(blob.encode()).hexdigest(),
            "conversations": len(conversations), "claims": claims}


def dev_records(conversations: Sequence[Conversation], config: Any, backend: Any) -> list[dict[str, Any]]:
    """Stages 2-3 of the in-process student ``backend`` on the human claims of ``conversations``, every stage 2
    claim with its label margin, claim PMI and word overlap (``evidence``), whether a head applies or not."""
    from .run import run_given_claims

    features = backend.evidence_features
    backend.evidence_features = True
    try:
        records, _ = run_given_claims(conversations, config, backend, evidence_seed=None)
    finally:
        backend.evidence_features = features
    return records


def claim_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per human claim of the given-claims records: its conversation (the CV group), the human category,
    stage 2's label and evidence features, stage 3's probabilities (where stage 3 ran)."""
    rows = []
    for r in records:
        for c, gold in zip(r["claims"], r.get("gold_claims") or []):
            s2, s3 = c.get("stage2") or {}, c.get("stage3") or {}
            ev = s2.get("evidence") or {}
            rows.append({"group": str(r["conversation_id"]), "text": c["text"], "human": gold["label"],
                         "stage2": s2.get("label"),
                         "features": {f: ev[f] for f in FEATURES if isinstance(ev.get(f), (int, float))},
                         "stage3": s3.get("label"), "stage3_probs": s3.get("probs")})
    return rows


def _folds(groups: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import GroupKFold

    n_groups = len(set(groups))
    if n_groups < 2:
        raise ValueError(f"cross-validation needs claims from at least 2 conversations, got {n_groups}")
    idx = np.arange(len(groups))
    return list(GroupKFold(n_splits=min(k, n_groups)).split(idx, groups=list(groups)))


def tuned_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The cut over 0.01-0.99 with the best accuracy on (p, y); ties: the one nearest 0.5."""
    accs = [((p > t) == y).mean() for t in THRESHOLDS]
    best = max(accs)
    return float(min((t for t, a in zip(THRESHOLDS, accs) if a == best), key=lambda t: abs(t - 0.5)))


def _mcnemar(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """McNemar's exact test on decisions ``a`` vs ``b`` (right / wrong against ``y``)."""
    from statsmodels.stats.contingency_tables import mcnemar

    ra, rb = a == y, b == y
    table = [[int((ra & rb).sum()), int((ra & ~rb).sum())], [int((~ra & rb).sum()), int((~ra & ~rb).sum())]]
    if table[0][1] + table[1][0] == 0:
        return {"only_first_right": 0, "only_second_right": 0, "p_value": 1.0}
    return {"only_first_right": table[0][1], "only_second_right": table[1][0],
            "p_value": float(mcnemar(table, exact=True).pvalue)}


def _accuracy(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    import warnings

    from sklearn.metrics import balanced_accuracy_score

    with warnings.catch_warnings():   # a label predicted that no human gave is a miss, not a warning
        warnings.simplefilter("ignore", UserWarning)
        balanced = balanced_accuracy_score(y, pred) if len(set(y.tolist())) > 1 else None
    return {"accuracy": round(float((y == pred).mean()), 4),
            "balanced_accuracy": None if balanced is None else round(float(balanced), 4)}


def _challenge(y: np.ndarray, student: str, student_pred: np.ndarray, rules: dict[str, np.ndarray],
               alpha: float) -> dict[str, Any]:
    """``chosen`` (the student candidate ``student``, or the best of ``rules`` where it wins by the margin),
    ``rule_margin`` and the best rule against the student (``rule_vs_student``; ``rule_won`` when it took the
    stage)."""
    acc = {n: float((p == y).mean()) for n, p in rules.items()}
    best = max(rules, key=lambda n: (acc[n], -list(rules).index(n)))
    mc = _mcnemar(y, rules[best], student_pred)
    vs = {"rule": best, "student": student, "rule_accuracy": round(acc[best], 4),
          "student_accuracy": round(float((student_pred == y).mean()), 4), "only_rule_right": mc["only_first_right"],
          "only_student_right": mc["only_second_right"], "p_value": mc["p_value"]}
    vs["wins"] = vs["rule_accuracy"] > vs["student_accuracy"] and mc["p_value"] < alpha
    out = {"rule_margin": {"alpha": alpha, "test": "McNemar exact on the out-of-fold decisions of the best rule and "
                                                   "the best student candidate; the rule must also be more accurate"},
           "rule_vs_student": vs, "chosen": best if vs["wins"] else student}
    if vs["wins"]:
        out["rule_won"] = vs
    return out


def _stage2_candidates() -> dict[str, Callable[[dict[str, np.ndarray], np.ndarray], EvidenceHead]]:
    def head(feats: dict[str, np.ndarray], y: np.ndarray) -> EvidenceHead:
        return fit({f: v.tolist() for f, v in feats.items()}, y.astype(bool).tolist())

    def tuned(feats: dict[str, np.ndarray], y: np.ndarray) -> EvidenceHead:
        h = head(feats, y)
        return dataclasses.replace(h, threshold=tuned_threshold(_p(h, feats), y))

    return {"head refit": head, "head refit + threshold": tuned}


def _p(head: EvidenceHead, feats: dict[str, np.ndarray]) -> np.ndarray:
    n = len(next(iter(feats.values())))
    get = lambda f, i: float(feats[f][i]) if f in feats else 0.0  # noqa: E731
    return np.array([head.p_verified(get("margin", i), get("pmi", i), get("overlap", i)) for i in range(n)])


def calibrate_stage2(rows: Sequence[dict[str, Any]], folds: int = 5, alpha: float = RULE_ALPHA) -> dict[str, Any]:
    """The stage 2 candidates' out-of-fold figures, the chosen one, and (when it is a refit) its head on all rows
    (a tuned overlap rule: its cut on all rows, ``threshold``)."""
    rows = [r for r in rows if r["stage2"] and set(FEATURES) <= set(r["features"])]
    y = np.array([r["human"] == VERIFIED for r in rows], dtype=int)
    if len(rows) < MIN_CLAIMS or len(set(y.tolist())) < 2:
        return {"kept": f"too few claims: {len(rows)} with stage 2 features, {len(set(y.tolist()))} outcome(s) "
                        f"(needs {MIN_CLAIMS}, both)", "claims": len(rows)}
    groups = [r["group"] for r in rows]
    feats = {f: np.array([r["features"][f] for r in rows], dtype=float) for f in FEATURES}
    splits = _folds(groups, folds)
    oof: dict[str, np.ndarray] = {"as trained": np.array([r["stage2"] == VERIFIED for r in rows], dtype=int)}
    overlap = feats["overlap"]
    oof["overlap rule (0.5)"] = (overlap >= 0.5).astype(int)
    for name, make in _stage2_candidates().items():
        oof[name] = np.zeros(len(rows), dtype=int)
        for train, test in splits:
            h = make({f: v[train] for f, v in feats.items()}, y[train])
            oof[name][test] = [h.says_verified(p) for p in _p(h, {f: v[test] for f, v in feats.items()})]
    oof["overlap rule, tuned"] = np.zeros(len(rows), dtype=int)
    for train, test in splits:
        oof["overlap rule, tuned"][test] = overlap[test] > tuned_threshold(overlap[train], y[train])
    student = ("as trained", *_stage2_candidates())
    figures = {name: _accuracy(y, oof[name]) for name in student}
    chosen = max(student, key=lambda n: (figures[n]["accuracy"], -student.index(n)))
    rules = {n: p for n, p in oof.items() if n not in student}
    out: dict[str, Any] = {"claims": len(rows), "verified": int(y.sum()), "folds": len(splits),
                           "conversations": len(set(groups)), "cross_validated": figures,
                           "rules": {n: _accuracy(y, p) for n, p in rules.items()},
                           "mcnemar_chosen_vs_overlap_tuned": _mcnemar(y, oof[chosen], oof["overlap rule, tuned"]),
                           "confusion_as_trained": _confusion2(y, oof["as trained"])}
    out.update(_challenge(y, chosen, oof[chosen], rules, alpha))
    out["mcnemar_chosen_vs_as_trained"] = _mcnemar(y, oof[out["chosen"]], oof["as trained"])
    out["confusion_chosen"] = _confusion2(y, oof[out["chosen"]])
    if out["chosen"] == "overlap rule, tuned":
        out["threshold"] = tuned_threshold(overlap, y)
    if out["chosen"] in _stage2_candidates():
        head = _stage2_candidates()[chosen](feats, y)
        out["head"] = dataclasses.replace(head, fitted={"on": "calibration dev claims", "claims": len(rows)})
    return out


def _confusion2(y: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    from sklearn.metrics import confusion_matrix

    return {"labels": ["UNVERIFIABLE", "VERIFIED"], "rows_human_cols_predicted":
            confusion_matrix(y, pred, labels=[0, 1]).tolist()}


def _shift_predict(logp: np.ndarray, shift: np.ndarray) -> np.ndarray:
    return np.argmax(logp + shift, axis=1)


def fit_shift(logp: np.ndarray, y: np.ndarray, rounds: int = 3) -> np.ndarray:
    """Per-label log-probability shifts maximising accuracy on (logp, y): coordinate ascent over ``SHIFT_GRID``,
    label by label; ties keep the smaller shift."""
    shift = np.zeros(logp.shape[1])
    for _ in range(rounds):
        moved = False
        for j in range(logp.shape[1]):
            def acc(v: float, j: int = j) -> float:
                s = shift.copy()
                s[j] = v
                return float((_shift_predict(logp, s) == y).mean())
            best = max(SHIFT_GRID, key=lambda v: (acc(v), -abs(v)))
            if best != shift[j]:
                shift[j], moved = best, True
        if not moved:
            break
    return shift


def calibrate_stage3(rows: Sequence[dict[str, Any]], folds: int = 5, alpha: float = RULE_ALPHA) -> dict[str, Any]:
    """The stage 3 candidates' out-of-fold figures on the human-unverifiable claims stage 3 labelled, the chosen
    one, and (when it is the shift) the shift fitted on all of them."""
    labels = list(STAGE3_LABELS)
    rows = [r for r in rows if r["human"] in labels and isinstance(r["stage3_probs"], dict)
            and all(isinstance(r["stage3_probs"].get(lab), (int, float)) for lab in labels)]
    y = np.array([labels.index(r["human"]) for r in rows], dtype=int)
    if len(rows) < MIN_CLAIMS or len(set(y.tolist())) < 2:
        return {"kept": f"too few claims: {len(rows)} human-unverifiable with stage 3 output, "
                        f"{len(set(y.tolist()))} category(ies) (needs {MIN_CLAIMS}, two)", "claims": len(rows)}
    logp = np.log(np.clip(np.array([[r["stage3_probs"][lab] for lab in labels] for r in rows], dtype=float),
                          1e-12, None))
    splits = _folds([r["group"] for r in rows], folds)
    oof = {"as trained": np.argmax(logp, axis=1), "label shift": np.zeros(len(rows), dtype=int)}
    for train, test in splits:
        oof["label shift"][test] = _shift_predict(logp[test], fit_shift(logp[train], y[train]))
    figures = {name: _accuracy(y, pred) for name, pred in oof.items()}
    chosen = "label shift" if figures["label shift"]["accuracy"] > figures["as trained"]["accuracy"] else "as trained"
    from sklearn.metrics import confusion_matrix

    from ..backends.cheap_baselines import wording_category

    wording = np.array([labels.index(wording_category(r["text"])) for r in rows])
    out: dict[str, Any] = {
        "claims": len(rows), "folds": len(splits), "cross_validated": figures,
        "rules": {"wording rule": _accuracy(y, wording)},
        "labels": labels,
        "confusion_as_trained": confusion_matrix(y, oof["as trained"], labels=range(len(labels))).tolist()}
    out.update(_challenge(y, chosen, oof[chosen], {"wording rule": wording}, alpha))
    final = wording if out["chosen"] == "wording rule" else oof[chosen]
    out["mcnemar_chosen_vs_as_trained"] = _mcnemar(y, final, oof["as trained"])
    out["confusion_chosen"] = confusion_matrix(y, final, labels=range(len(labels))).tolist()
    if out["chosen"] == "label shift":
        out["shift"] = {lab: float(v) for lab, v in zip(labels, fit_shift(logp, y))}
    return out


def calibrate_stage1(model_records: Sequence[dict[str, Any]], splitter_records: Sequence[dict[str, Any]], rule: str,
                     alpha: float = RULE_ALPHA) -> dict[str, Any]:
    """Stage 1's candidates by turn accuracy under ``rule`` (unknown = wrong) over the gold turns both runs of the
    whole pipeline scored: the student's decomposition (``model_records``) and the sentence splitter's."""
    from .metrics import correctness

    a, b = correctness(model_records, rule), correctness(splitter_records, rule)
    keys = sorted(set(a) & set(b))
    y = np.ones(len(keys), dtype=int)
    pred = {"as trained": np.array([a[k] for k in keys], dtype=int),
            "sentence splitter": np.array([b[k] for k in keys], dtype=int)}
    if len(keys) < MIN_TURNS:
        return {"kept": f"too few gold turns: {len(keys)} (needs {MIN_TURNS})", "turns": len(keys)}
    out: dict[str, Any] = {"turns": len(keys), "rule": rule,
                           "folds": "none: neither candidate is fitted; stages 2-3 as calibrated on the whole file",
                           "cross_validated": {"as trained": _accuracy(y, pred["as trained"])},
                           "rules": {"sentence splitter": _accuracy(y, pred["sentence splitter"])}}
    out.update(_challenge(y, "as trained", pred["as trained"], {"sentence splitter": pred["sentence splitter"]},
                          alpha))
    return out


def held_out_accuracy(cal: Calibration, rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """On claim rows the calibration was not fitted on: stage 2 (VERIFIED or not) and stage 3 (category of the
    human-unverifiable claims stage 3 labelled) accuracy as trained and as calibrated (a stage a rule took: the
    rule's)."""
    from ..backends.cheap_baselines import wording_category

    labels = list(STAGE3_LABELS)
    r2 = [r for r in rows if r["stage2"] and set(FEATURES) <= set(r["features"])]
    y2 = np.array([r["human"] == VERIFIED for r in r2], dtype=int)
    trained2 = np.array([r["stage2"] == VERIFIED for r in r2], dtype=int)
    cal2 = trained2
    if "stage2" in cal.rules and r2:
        t = cal.rules["stage2"].get("threshold")
        overlap = np.array([r["features"]["overlap"] for r in r2])
        cal2 = (overlap >= 0.5 if t is None else overlap > t).astype(int)
    elif cal.stage2 is not None and r2:
        feats = {f: np.array([r["features"][f] for r in r2]) for f in FEATURES}
        cal2 = np.array([cal.stage2.says_verified(p) for p in _p(cal.stage2, feats)], dtype=int)
    r3 = [r for r in rows if r["human"] in labels and isinstance(r["stage3_probs"], dict)]
    y3 = np.array([labels.index(r["human"]) for r in r3], dtype=int)
    logp = np.log(np.clip(np.array([[r["stage3_probs"].get(lab, 0.0) for lab in labels] for r in r3], dtype=float),
                          1e-12, None)).reshape(len(r3), len(labels))
    delta = np.array([(cal.fitted.get("stage3") or {}).get("shift", {}).get(lab, 0.0) for lab in labels])
    cal3 = (np.array([labels.index(wording_category(r["text"])) for r in r3], dtype=int) if "stage3" in cal.rules
            else _shift_predict(logp, delta))
    acc = lambda y, p: float((y == p).mean()) if len(y) else None  # noqa: E731
    return {"stage2": {"claims": len(r2), "as_trained": acc(y2, trained2), "calibrated": acc(y2, cal2)},
            "stage3": {"claims": len(r3), "as_trained": acc(y3, np.argmax(logp, axis=1)), "calibrated": acc(y3, cal3)}}


def fit_calibration(records: Sequence[dict[str, Any]], name: str, dev: dict[str, Any], folds: int = 5,
                    stage3_prior: LabelPrior | None = None, alpha: float = RULE_ALPHA) -> Calibration:
    """The calibration the given-claims ``records`` (stages 2-3 on the dev file's human claims, stage 2 with its
    evidence features) choose at stages 2-3; ``stage3_prior``: the prior stage 3 ran with (a fitted shift adds to
    it). Stage 1 is chosen after, on whole-pipeline runs with these stages 2-3 (:func:`with_stage1`)."""
    from ..backends.cheap_baselines import RULE_NAMES

    check_name(name)
    rows = claim_rows(records)
    if not rows:
        raise ValueError("the dev conversations hold no human claims (turns' human_claims with their categories): "
                         "nothing to calibrate on")
    s2, s3 = calibrate_stage2(rows, folds, alpha), calibrate_stage3(rows, folds, alpha)
    head = s2.pop("head", None)
    prior = None
    if "shift" in s3:
        before = stage3_prior.shift if stage3_prior is not None else {}
        prior = LabelPrior({lab: before.get(lab, 0.0) + v for lab, v in s3["shift"].items()})
    rules: dict[str, dict[str, Any]] = {}
    if "rule_won" in s2:
        rules["stage2"] = {"rule": RULE_NAMES["stage2"], "threshold": s2.get("threshold")}
    if "rule_won" in s3:
        rules["stage3"] = {"rule": RULE_NAMES["stage3"]}
    return Calibration(name, head, prior, {"dev": dev, "stage2": s2, "stage3": s3}, rules)


def choose_stage1(cal: Calibration, conversations: Sequence[Conversation], config: Any, backend: Any, rule: str,
                  alpha: float = RULE_ALPHA) -> Calibration:
    """``cal`` with stage 1 chosen (:func:`calibrate_stage1`) on the whole pipeline over the ``conversations`` with
    gold turn labels, stages 2-3 as ``cal`` has them, the student's stage 1 or the splitter's; ``cal`` as it is when
    none has a gold turn label. ``backend`` gets ``cal``'s head and prior (as applying it would)."""
    from ..backends.calibration import apply_calibration
    from ..backends.cheap_baselines import StageRules
    from ..backends.stage_routing import RequestMemo, StageRouter
    from .run import run_pipeline

    gold = [c for c in conversations if any(c.turns[i].gold_label is not None for i in c.scored_turns)]
    if not gold:
        return cal
    scored = RequestMemo(apply_calibration(backend, cal))
    own = run_pipeline(gold, config, scored)[0]
    split = run_pipeline(gold, config, StageRouter(scored, {"stage1": StageRules()}))[0]
    return with_stage1(cal, calibrate_stage1(own, split, rule, alpha))


def with_stage1(cal: Calibration, stage1: dict[str, Any]) -> Calibration:
    """``cal`` with stage 1's choice (:func:`calibrate_stage1`) recorded, and the splitter in its rules where it won."""
    from ..backends.cheap_baselines import RULE_NAMES

    rules = dict(cal.rules)
    if "rule_won" in stage1:
        rules["stage1"] = {"rule": RULE_NAMES["stage1"]}
    return dataclasses.replace(cal, fitted={**cal.fitted, "stage1": stage1}, rules=rules)


def summary_rows(cal: Calibration) -> list[tuple[str, str, str, str, str]]:
    """(stage, candidate, accuracy, balanced accuracy, chosen) for the terminal table: per stage the student's
    candidates, then the rules (stage 1: turn accuracy; stages 2-3: claim accuracy)."""
    out = []
    for stage in ("stage1", "stage2", "stage3"):
        info = cal.fitted.get(stage)
        if info is None:
            continue
        if "kept" in info:
            out.append((stage, "as trained (kept)", "-", "-", info["kept"]))
            continue
        rules = {f"{name} (rule)": fig for name, fig in info.get("rules", {}).items()}
        vs = info.get("rule_vs_student") or {}
        for name, fig in {**info.get("cross_validated", {}), **rules}.items():
            ba = fig.get("balanced_accuracy")
            mark = "chosen" if name.removesuffix(" (rule)") == info.get("chosen") else ""
            if vs and name == f"{vs['rule']} (rule)":   # the best rule, against the best student candidate
                mark += f"{' ' if mark else ''}(p = {vs['p_value']:.2g} vs {vs['student']})"
            out.append((stage, name, percent(fig["accuracy"]), percent(ba, missing="-"), mark))
    return out
