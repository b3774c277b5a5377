"""Paired significance (McNemar, as in the paper's Appendix B) and bootstrap intervals on accuracy.

McNemar variants (statsmodels ``mcnemar``): ``exact`` is the two-sided binomial test on the
discordant counts b and c; ``chi2`` the chi-square statistic without and ``chi2-cc`` with Edwards'
continuity correction. ``exact`` reproduces the paper's p-values (e.g. b=90, c=59 -> 0.013712, AIS,
GPT-4o, VISTA vs LLM-as-Judge; docs/performance.md, 'Retired experiments', for every row), so it is the
default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MCNEMAR_VARIANTS = ("exact", "chi2", "chi2-cc")


def mcnemar_test(b: int, c: int, variant: str = "exact") -> dict[str, Any]:
    """McNemar's test from the discordant counts: ``b`` = system 1 right and system 2 wrong, ``c`` the reverse."""
    from statsmodels.stats.contingency_tables import mcnemar

    if variant not in MCNEMAR_VARIANTS:
        raise ValueError(f"McNemar variant must be one of {MCNEMAR_VARIANTS}, got {variant!r}")
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return {"b": b, "c": c, "statistic": None, "pvalue": 1.0, "variant": variant}
    res = mcnemar([[0, b], [c, 0]], exact=variant == "exact", correction=variant == "chi2-cc")
    return {"b": int(b), "c": int(c), "statistic": float(res.statistic), "pvalue": float(res.pvalue),
            "variant": variant}


def significance_mark(p: float | None) -> str:
    """The paper's marks: ``***`` p < .001, ``**`` p < .01, ``*`` p < .05, ``ns`` otherwise."""
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else "ns"


def paired_mcnemar(correct1: Sequence[bool], correct2: Sequence[bool], variant: str = "exact") -> dict[str, Any]:
    """McNemar on two systems' per-item correctness over the same items, with accuracies and Δ."""
    if len(correct1) != len(correct2):
        raise ValueError(f"paired items differ in number: {len(correct1)} vs {len(correct2)}")
    b = sum(1 for x, y in zip(correct1, correct2) if x and not y)
    c = sum(1 for x, y in zip(correct1, correct2) if y and not x)
    out = mcnemar_test(b, c, variant)
    n = len(correct1)
    out["n"] = n
    if n:
        out["accuracy_1"] = sum(map(bool, correct1)) / n
        out["accuracy_2"] = sum(map(bool, correct2)) / n
        out["delta"] = out["accuracy_1"] - out["accuracy_2"]
    out["mark"] = significance_mark(out["pvalue"])
    return out


def bootstrap_accuracy(correct: Sequence[bool], n_resamples: int = 1000, seed: int = 0,
                       confidence: float = 0.95) -> dict[str, Any]:
    """Accuracy with a percentile bootstrap interval (scipy, seeded: the same seed gives the same interval)."""
    import numpy as np
    from scipy.stats import bootstrap

    x = np.asarray([float(bool(v)) for v in correct])
    if x.size == 0:
        return {"accuracy": None, "low": None, "high": None, "n": 0}
    acc = float(x.mean())
    if x.size < 2 or n_resamples <= 0 or np.all(x == x[0]):
        # A constant sample has a degenerate (zero-width) interval; scipy warns on it.
        return {"accuracy": acc, "low": acc, "high": acc, "n": int(x.size), "resamples": int(n_resamples)}
    res = bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                    rng=np.random.default_rng(seed), vectorized=True)
    ci = res.confidence_interval
    return {"accuracy": acc, "low": float(ci.low), "high": float(ci.high), "n": int(x.size),
            "resamples": int(n_resamples), "confidence": confidence}


def paired_bootstrap_macro_f1(gold: Sequence[str], a: Sequence[str], b: Sequence[str], labels: Sequence[str],
                              n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Macro F1 of predictions ``a`` minus ``b`` on the same items, with a paired bootstrap over items: the
    95% percentile interval and a two-sided p (twice the smaller share of resampled differences on either side
    of zero). Seeded: the same seed gives the same answer."""
    import numpy as np
    from sklearn.metrics import f1_score

    if not (len(gold) == len(a) == len(b)) or not gold:
        raise ValueError(f"paired bootstrap: gold, a and b must have the same length (>0), got "
                         f"{len(gold)}, {len(a)}, {len(b)}")
    g, pa, pb = map(np.asarray, (gold, a, b))
    labels = list(labels)

    def f1(y, p):
        return f1_score(y, p, labels=labels, average="macro", zero_division=0)

    diff = f1(g, pa) - f1(g, pb)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_resamples):
        i = rng.integers(0, len(g), len(g))
        boots.append(f1(g[i], pa[i]) - f1(g[i], pb[i]))
    boots = np.asarray(boots)
    p = min(1.0, 2 * min((boots <= 0).mean(), (boots >= 0).mean()))
    return {"diff": round(float(diff), 4), "ci95": [round(float(x), 4) for x in np.percentile(boots, [2.5, 97.5])],
            "p": round(float(p), 4), "resamples": n_resamples}
