"""Evaluation metrics over engine records (``TurnResult.to_dict()``), per benchmark and overall.

* Turn level, under each rule: accuracy, balanced accuracy, precision / recall / F1 with
  "hallucinated" positive, macro-F1, coverage (share of gold turns with a verdict), plus
  ``accuracy_all`` (an ``unknown`` verdict counted wrong, the basis of the paired tests); across
  systems, ``common_coverage``: each one's accuracy over the turns all of them gave a verdict.
* Claim level, on data with human claims (the VISTA human set, as in the paper's Table 5): predicted claims are matched
  one-to-one to human claims (normalised text equal, else sentence-embedding cosine > threshold with all-MiniLM-L6-v2),
  then claim accuracy and macro-F1 over the five claim labels (those that occur among the human or predicted labels of
  the matched claims), the binary VERIFIED-vs-not accuracy, claim-set agreement (Jaccard, F1), and from the stage 2
  probabilities ROC-AUC, Brier score and expected calibration error.

Scores come from scikit-learn; ECE (which neither scikit-learn nor scipy provide) is the usual
bin-weighted gap between confidence and frequency over the same bins as ``calibration_curve``.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..data.schema import (
    CLAIM_CATEGORIES,
    FAITHFUL,
    HALLUCINATED,
    TURN_LABELS,
    UNKNOWN,
    UNVERIFIABLE,
    VERIFIED,
)
from .claim_matching import EMBEDDING_PACKAGE, ClaimMatch, ClaimMatcher, normalise_claim  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

NO_CATEGORY = "(none)"     # predicted claim whose category could not be parsed
OVERALL = "overall"

Record = dict[str, Any]


def turn_key(r: Record) -> tuple[str, int]:
    return (r["conversation_id"], r["turn_index"])


def gold_turns(records: Iterable[Record]) -> list[Record]:
    """Scored turns with a binary gold label."""
    return [r for r in records if r.get("scored") and r.get("gold_label") in TURN_LABELS]


def by_source(records: Sequence[Record]) -> dict[str, list[Record]]:
    """``{source: records}`` plus ``overall`` (all records), sources sorted."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[r["source"]].append(r)
    return {**{s: groups[s] for s in sorted(groups)}, OVERALL: list(records)}


# -- turn level ----------------------------------------------------------------------------------------

def correctness(records: Iterable[Record], rule: str) -> dict[tuple[str, int], bool]:
    """Per gold turn: is the verdict right? ``unknown`` counts as wrong (it is no answer)."""
    return {turn_key(r): r["verdicts"].get(rule) == r["gold_label"] for r in gold_turns(records)}


def turn_metrics(records: Sequence[Record], rule: str) -> dict[str, Any]:
    """Turn-level metrics of one system under ``rule`` over the gold-labelled scored turns."""
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        confusion_matrix,
        f1_score,
        precision_recall_fscore_support,
        roc_auc_score,
    )

    gold = gold_turns(records)
    known = [r for r in gold if r["verdicts"].get(rule, UNKNOWN) != UNKNOWN]
    out: dict[str, Any] = {"n_gold": len(gold), "n": len(known),
                           "coverage": len(known) / len(gold) if gold else None,
                           "gold_balance": dict(Counter(r["gold_label"] for r in gold))}
    if gold:
        out["accuracy_all"] = sum(r["verdicts"].get(rule) == r["gold_label"] for r in gold) / len(gold)
    if not known:
        return out
    y = [r["gold_label"] for r in known]
    p = [r["verdicts"][rule] for r in known]
    prec, rec, f1, _ = precision_recall_fscore_support(y, p, labels=[HALLUCINATED], average="binary",
                                                       pos_label=HALLUCINATED, zero_division=0)
    cm = confusion_matrix(y, p, labels=list(TURN_LABELS))
    out.update(
        accuracy=float(accuracy_score(y, p)),
        # balanced accuracy over both gold classes even when the predictions use only one
        balanced_accuracy=float(balanced_accuracy_score(y, p)) if len(set(y)) > 1 else None,
        precision=float(prec), recall=float(rec), f1=float(f1),
        macro_f1=float(f1_score(y, p, labels=list(TURN_LABELS), average="macro", zero_division=0)),
        confusion={"labels": list(TURN_LABELS), "matrix": cm.tolist()},
    )
    scored = [r for r in known if r.get("vista_scores", {}).get(rule) is not None]
    if len({r["gold_label"] for r in scored}) == 2:
        # ROC-AUC of the share of unsafe claims as a hallucination score
        out["auc_vista_score"] = float(roc_auc_score([r["gold_label"] == HALLUCINATED for r in scored],
                                                     [1.0 - r["vista_scores"][rule] for r in scored]))
    return out


SUMMARY_KEYS = ("n_gold", "n", "coverage", "accuracy", "precision", "recall", "f1")


def turn_summary(records: Sequence[Record], rule: str) -> dict[str, Any] | None:
    """The part of :func:`turn_metrics` a score summary reports (``SUMMARY_KEYS``; accuracy to F1 only when
    some gold turn has a verdict); None when no scored turn has a gold label."""
    m = turn_metrics(records, rule)
    if not m["n_gold"]:
        return None
    return {k: m[k] for k in SUMMARY_KEYS if k in m}


def common_coverage(systems: Mapping[str, Sequence[Record]], rule: str) -> dict[str, dict[str, Any]]:
    """Accuracy of each system over the gold turns that *every* one of ``systems`` gave a verdict under
    ``rule`` (their common coverage), per benchmark and overall: ``{group: {"n", "n_gold", "coverage",
    "accuracy": {system: ...}}}``. Unlike each system's own accuracy, these compare like with like."""
    gold = {name: {turn_key(r): r for r in gold_turns(rs)} for name, rs in systems.items()}
    if not gold:
        return {}
    shared = set.intersection(*(set(g) for g in gold.values()))
    common = {k for k in shared if all(g[k]["verdicts"].get(rule, UNKNOWN) != UNKNOWN for g in gold.values())}
    first = next(iter(gold.values()))
    out: dict[str, dict[str, Any]] = {}
    for group, rs in by_source([first[k] for k in sorted(shared)]).items():
        keys = [turn_key(r) for r in rs if turn_key(r) in common]
        out[group] = {
            "n": len(keys), "n_gold": len(rs), "coverage": len(keys) / len(rs) if rs else None,
            "accuracy": {name: sum(g[k]["verdicts"][rule] == g[k]["gold_label"] for k in keys) / len(keys)
                         if keys else None for name, g in gold.items()},
        }
    return out


def majority_turn_metrics(records: Sequence[Record]) -> dict[str, Any]:
    """The majority-class baseline (always the most frequent gold turn label)."""
    gold = gold_turns(records)
    if not gold:
        return {"n_gold": 0}
    label, n = Counter(r["gold_label"] for r in gold).most_common(1)[0]
    return {"label": label, "n_gold": len(gold), "accuracy": n / len(gold)}


# -- claim matching (scoring/claim_matching.py) ------------------------------------------------------------

def match_records(records: Sequence[Record], matcher: ClaimMatcher) -> dict[tuple[str, int], list[ClaimMatch]]:
    """Claim matches of every scored turn that has human claims."""
    turns = [r for r in records if r.get("scored") and r.get("gold_claims") is not None]
    if matcher.use_embeddings:
        matcher.encode([c["text"] for r in turns for c in [*r["claims"], *r["gold_claims"]]])
    return {turn_key(r): matcher.match([c["text"] for c in r["claims"]], [c["text"] for c in r["gold_claims"]])
            for r in turns}


# -- claim level ---------------------------------------------------------------------------------------

def expected_calibration_error(y_true: Sequence[int], prob: Sequence[float], n_bins: int = 10) -> float:
    """Bin-weighted |frequency - mean confidence| over ``n_bins`` equal-width bins (as calibration_curve)."""
    import numpy as np

    y, p = np.asarray(y_true, dtype=float), np.asarray(prob, dtype=float)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], p)   # calibration_curve's binning
    ece = 0.0
    for b in np.unique(bins):
        sel = bins == b
        ece += sel.sum() / len(p) * abs(y[sel].mean() - p[sel].mean())
    return float(ece)


def claim_metrics(records: Sequence[Record], matches: dict[tuple[str, int], list[ClaimMatch]],
                  five_labels: bool = True, n_bins: int = 10) -> dict[str, Any] | None:
    """Claim-level metrics of the turns in ``records`` that have human claims (None if none do).

    ``five_labels`` False (FActScore: supported / not supported only) reports the binary scores only.
    """
    import numpy as np
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, jaccard_score

    turns = [r for r in records if turn_key(r) in matches]
    if not turns:
        return None
    gold_labels, pred_labels, probs, set_true, set_pred = [], [], [], [], []
    per_turn_f1, per_turn_jaccard = [], []
    how = Counter()
    for r in turns:
        ms = matches[turn_key(r)]
        n_pred, n_gold, k = len(r["claims"]), len(r["gold_claims"]), len(ms)
        # claim-set agreement as binary vectors: matched pairs, unmatched human, unmatched predicted
        t = [1] * k + [1] * (n_gold - k) + [0] * (n_pred - k)
        p = [1] * k + [0] * (n_gold - k) + [1] * (n_pred - k)
        set_true += t
        set_pred += p
        if t or p:
            per_turn_f1.append(f1_score(t, p, zero_division=0))
            per_turn_jaccard.append(jaccard_score(t, p, zero_division=0))
        for m in ms:
            how[m.how] += 1
            gold = r["gold_claims"][m.gold]["label"]
            if gold not in CLAIM_CATEGORIES:
                continue
            claim = r["claims"][m.pred]
            gold_labels.append(gold)
            pred_labels.append(claim["category"] or NO_CATEGORY)
            s2 = claim.get("stage2") or {}
            pv = (s2.get("probs") or {}).get(VERIFIED)
            probs.append(pv)
    n_gold = sum(len(r["gold_claims"]) for r in turns)
    n_pred = sum(len(r["claims"]) for r in turns)
    out: dict[str, Any] = {
        "turns": len(turns), "human_claims": n_gold, "predicted_claims": n_pred,
        "matched": sum(how.values()), "matched_exact": how["exact"], "matched_embedding": how["embedding"],
        "human_claims_matched": sum(how.values()) / n_gold if n_gold else None,
        "set_f1": float(f1_score(set_true, set_pred, zero_division=0)) if set_true else None,
        "set_jaccard": float(jaccard_score(set_true, set_pred, zero_division=0)) if set_true else None,
        "set_f1_turn_mean": float(np.mean(per_turn_f1)) if per_turn_f1 else None,
        "set_jaccard_turn_mean": float(np.mean(per_turn_jaccard)) if per_turn_jaccard else None,
        "n_labelled_matches": len(gold_labels),
    }
    if not gold_labels:
        return out
    gold_bin = [g == VERIFIED for g in gold_labels]
    pred_bin = [p == VERIFIED for p in pred_labels]
    out["binary_accuracy"] = float(accuracy_score(gold_bin, pred_bin))
    if five_labels:
        labels = [*CLAIM_CATEGORIES, NO_CATEGORY]
        out["accuracy"] = float(accuracy_score(gold_labels, pred_labels))
        # over the five labels that occur (human or predicted): a label absent from both is no error
        present = [lab for lab in CLAIM_CATEGORIES if lab in set(gold_labels) | set(pred_labels)]
        out["macro_f1"] = float(f1_score(gold_labels, pred_labels, labels=present, average="macro", zero_division=0))
        out["macro_f1_labels"] = present
        out["confusion"] = {"labels": labels, "rows": "human", "columns": "predicted",
                            "matrix": confusion_matrix(gold_labels, pred_labels, labels=labels).tolist()}
    else:
        out["five_labels"] = "not applicable: this system labels claims supported / not supported only"
    scored = [(g, pv) for g, pv in zip(gold_bin, probs) if pv is not None]
    if len(scored) < len(gold_bin):
        out["stage2_probs_missing"] = len(gold_bin) - len(scored)
    if scored:
        out["stage2_calibration"] = stage2_calibration([int(g) for g, _ in scored], [float(v) for _, v in scored],
                                                       n_bins)
    return out


def stage2_calibration(y: list[int], pv: list[float], n_bins: int) -> dict[str, Any]:
    """Brier score, expected calibration error, reliability curve and ROC AUC of stage 2's P(VERIFIED) ``pv``
    against the human VERIFIED labels ``y``."""
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss, roc_auc_score

    cal: dict[str, Any] = {"n": len(y), "brier": float(brier_score_loss(y, pv)),
                           "ece": expected_calibration_error(y, pv, n_bins), "bins": n_bins}
    frac, mean = calibration_curve(y, pv, n_bins=n_bins, strategy="uniform", pos_label=1)
    cal["curve"] = {"mean_predicted": mean.tolist(), "fraction_verified": frac.tolist()}
    if len(set(y)) == 2:
        cal["roc_auc"] = float(roc_auc_score(y, pv))
    else:
        cal["roc_auc"] = None
        cal["roc_auc_reason"] = "matched human claims are all of one class"
    return cal


def majority_claim_metrics(records: Sequence[Record]) -> dict[str, Any] | None:
    """The paper's Table 5 majority baseline: every human claim gets the most frequent human label."""
    from sklearn.metrics import accuracy_score, f1_score

    gold = [c["label"] for r in records if r.get("scored") and r.get("gold_claims")
            for c in r["gold_claims"] if c["label"] in CLAIM_CATEGORIES]
    if not gold:
        return None
    label = Counter(gold).most_common(1)[0][0]
    pred = [label] * len(gold)
    present = [lab for lab in CLAIM_CATEGORIES if lab in set(gold)]
    verified = sum(g == VERIFIED for g in gold) / len(gold)
    return {"label": label, "human_claims": len(gold), "accuracy": float(accuracy_score(gold, pred)),
            "macro_f1": float(f1_score(gold, pred, labels=present, average="macro", zero_division=0)),
            "binary_label": VERIFIED if verified > 0.5 else UNVERIFIABLE,
            "binary_accuracy": max(verified, 1 - verified)}


def system_metrics(records: Sequence[Record], rules: Sequence[str],
                   matches: dict[tuple[str, int], list[ClaimMatch]] | None, five_labels: bool = True,
                   n_bins: int = 10) -> dict[str, Any]:
    """``{benchmark or 'overall': {"turn": {rule: ...}, "claim": ...}}`` for one system."""
    out: dict[str, Any] = {}
    for source, rs in by_source(records).items():
        entry: dict[str, Any] = {
            "scored_turns": sum(bool(r.get("scored")) for r in rs),
            "turn": {rule: turn_metrics(rs, rule) for rule in rules},
        }
        if matches is not None:
            entry["claim"] = claim_metrics(rs, matches, five_labels, n_bins)
        out[source] = entry
    return out


def given_claims_metrics(records: Sequence[Record], n_bins: int = 10) -> dict[str, Any]:
    """Claim metrics of a run on the human claims (``EngineConfig(claims="gold")``), per benchmark and
    overall: every claim is its own human claim, so the matches are the identity."""
    matches = {turn_key(r): [ClaimMatch(j, j, 1.0, "exact") for j in range(len(r["gold_claims"]))]
               for r in records if r.get("scored") and r.get("gold_claims")}
    return {source: claim_metrics(rs, matches, True, n_bins) for source, rs in by_source(records).items()}


def head_parts(records: Sequence[Record]) -> dict[str, Any] | None:
    """Stage 2 accuracy on the human claims part by part, where the claims kept their evidence signals
    (backends/evidence_head.py): the adapter alone (margin > 0), the head (the label given), and the overlap rule on
    the same claims; None when no claim has them."""
    rows = []
    for r in records:
        if not (r.get("scored") and r.get("gold_claims")):
            continue
        for gold, claim in zip(r["gold_claims"], r["claims"]):
            ev = (claim.get("stage2") or {}).get("evidence") or {}
            if gold["label"] in CLAIM_CATEGORIES and "margin" in ev:
                rows.append((gold["label"] == VERIFIED, ev["margin"] > 0, claim.get("category") == VERIFIED,
                             ev.get("overlap", 0.0) >= 0.5, bool(ev.get("head"))))
    if not rows:
        return None
    n = len(rows)
    return {"claims": n, "head_applied": sum(x[4] for x in rows),
            "adapter_alone": sum(g == m for g, m, *_ in rows) / n,
            "as_labelled": sum(g == c for g, _, c, *_ in rows) / n,
            "overlap_rule": sum(g == o for g, _, _, o, _ in rows) / n}


def claim_correctness(records: Sequence[Record], binary: bool = True) -> dict[tuple[str, int, int], bool]:
    """Per human claim of a given-claims run: is its label right? ``binary``: VERIFIED vs not (stage 2);
    else the five categories (an unparsed category is wrong)."""
    out = {}
    for r in records:
        if not (r.get("scored") and r.get("gold_claims")):
            continue
        for j, (gold, claim) in enumerate(zip(r["gold_claims"], r["claims"])):
            if gold["label"] not in CLAIM_CATEGORIES:
                continue
            pred = claim.get("category")
            out[(*turn_key(r), j)] = (((pred == VERIFIED) == (gold["label"] == VERIFIED)) if binary
                                      else pred == gold["label"])
    return out


__all__ = [
    "FAITHFUL",
    "HALLUCINATED",
    "OVERALL",
    "PUBLISHED_WORLD_F1",
    "SUMMARY_KEYS",
    "ClaimMatch",
    "ClaimMatcher",
    "by_source",
    "claim_correctness",
    "claim_metrics",
    "common_coverage",
    "correctness",
    "expected_calibration_error",
    "given_claims_metrics",
    "gold_turns",
    "head_parts",
    "majority_claim_metrics",
    "majority_turn_metrics",
    "match_records",
    "normalise_claim",
    "system_metrics",
    "turn_key",
    "turn_metrics",
    "turn_summary",
    "world_metrics",
    "world_section",
]


# The mixed-context study's published three-way macro F1 on all of FHSumBench (paper Tables 1 and 2).
PUBLISHED_WORLD_F1 = {
    "random": 0.3185, "vanilla judge, Llama3-8B": 0.3280, "vanilla judge, Qwen2.5-14B": 0.4600,
    "vanilla judge, GPT-4o": 0.4612, "chain of thought, Qwen2.5-14B": 0.4733,
    "reflection retrieval, GPT-4o (best)": 0.5010,
}


def world_metrics(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """The study's metric: macro precision, recall and F1 over its three labels (an unknown prediction is
    wrong for every label), each label's accuracy (its recall), and the confusion matrix (unknown a column)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    from ..pipeline.engine import FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION

    labels = [FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION]
    p, r, f, _ = precision_recall_fscore_support(gold, predicted, labels=labels, average="macro", zero_division=0)
    _, per_r, _, support = precision_recall_fscore_support(gold, predicted, labels=labels, zero_division=0)
    columns = [*labels, UNKNOWN]
    cm = confusion_matrix(gold, predicted, labels=columns)[: len(labels)]
    return {"n": len(gold), "macro_precision": round(float(p), 4), "macro_recall": round(float(r), 4),
            "macro_f1": round(float(f), 4), "unknown": sum(x == UNKNOWN for x in predicted),
            "label_accuracy": {lab: round(float(x), 4) for lab, x in zip(labels, per_r)},
            "support": {lab: int(n) for lab, n in zip(labels, support)},
            "confusion": {"rows (gold)": labels, "columns (predicted)": columns, "matrix": cm.tolist()}}


def world_claim_metrics(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """The world stage's claim labels (TRUE / FALSE / NOT ENOUGH KNOWLEDGE): macro F1, accuracy, each label's
    recall as ``hits/support``, the predicted counts and the confusion matrix (rows gold)."""
    from sklearn.metrics import confusion_matrix, f1_score

    from ..data.vocabulary import WORLD_LABELS

    labels = list(WORLD_LABELS)
    gold, predicted = list(gold), list(predicted)
    if len(gold) != len(predicted) or not gold:
        raise ValueError(f"need as many predictions as gold labels (>0), got {len(predicted)} and {len(gold)}")
    return {"n": len(gold),
            "macro_f1": round(float(f1_score(gold, predicted, labels=labels, average="macro", zero_division=0)), 4),
            "accuracy": round(sum(g == x for g, x in zip(gold, predicted)) / len(gold), 4),
            "recall": {lab: f"{sum(g == x == lab for g, x in zip(gold, predicted))}/{gold.count(lab)}"
                       for lab in labels},
            "predicted": dict(Counter(predicted)),
            "confusion": {"labels": labels, "matrix": confusion_matrix(gold, predicted, labels=labels).tolist()}}


def world_section(systems: Mapping[str, Sequence[Record]], seed: int) -> dict[str, Any] | None:
    """Three-way results of every system that gave a ``world_verdict`` on turns with a ``world_gold``, a
    seeded uniform random baseline on the same turns, and the published rows; None without such turns."""
    import numpy as np

    from ..pipeline.engine import FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION

    out: dict[str, Any] = {}
    gold_turns: list[Record] = []
    for name, records in systems.items():
        turns = [r for r in records if r.get("scored") and r.get("world_gold")]
        if turns and any("world_verdict" in r for r in turns):
            out[name] = world_metrics([r["world_gold"] for r in turns], [r.get("world_verdict") or UNKNOWN
                                                                        for r in turns])
            gold_turns = gold_turns or turns
    if not gold_turns:
        return None
    rng = np.random.default_rng(seed)
    labels = [FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION]
    out["random"] = world_metrics([r["world_gold"] for r in gold_turns],
                                  [labels[i] for i in rng.integers(0, 3, len(gold_turns))])
    return {"systems": out, "published_macro_f1": PUBLISHED_WORLD_F1,
            "note": "published rows: all 1,336 FHSumBench summaries; ours: the evaluated turns"}
