"""The run folder's PNG plots (matplotlib, Agg): ``accuracy.png`` (turn accuracy with bootstrap 95% intervals per
system and benchmark, one panel per rule; a diamond marks the accuracy on the turns every system covered),
``confusion_stage3.png`` (predicted vs human claim categories on matched claims, per system) and ``calibration.png``
(stage 2 reliability curve: P(VERIFIED) vs share verified). :mod:`.report` writes them beside ``report.md``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..scoring.metrics import OVERALL
from .results import Calibration, Results

PLOTS = ("accuracy.png", "confusion_stage3.png", "calibration.png")


def ok_systems(results: Results | Mapping[str, Any]) -> list[str]:
    """The systems that ran the whole pipeline (a claim-level-only one, ``eval.claim_level_only``, has no turn
    metrics: its figures are in the claim-level tables)."""
    return Results.of(results).ok_systems()


def benchmark_groups(results: Results | Mapping[str, Any]) -> list[str]:
    return Results.of(results).benchmark_groups()


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_accuracy(results: Results | Mapping[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    results = Results.of(results)
    rules = results.rules
    ok, groups = results.ok_systems(), results.benchmark_groups()
    colours = {n: f"C{i}" for i, n in enumerate(results.systems)}
    fig, axes = plt.subplots(1, len(rules), figsize=(max(7.0, 0.5 * len(groups) * max(1, len(ok))) * len(rules)
                                                     / 1.6, 4.6), squeeze=False, sharey=True)
    for ax, rule in zip(axes[0], rules):
        if not ok:
            _no_data(ax, "no system ran")
            continue
        width = 0.8 / len(ok)
        x = np.arange(len(groups))
        for k, name in enumerate(ok):
            vals, lo, hi = [], [], []
            for g in groups:
                ci = results.interval(name, rule, g)
                a = ci.accuracy
                vals.append(np.nan if a is None else a)
                lo.append(0 if a is None else a - ci.low)
                hi.append(0 if a is None else ci.high - a)
            pos = x + (k - (len(ok) - 1) / 2) * width
            ax.bar(pos, vals, width, yerr=[lo, hi], capsize=2, color=colours[name], label=name)
            common = [results.turn(name, g, rule).accuracy_common for g in groups]
            ax.plot(pos, [np.nan if c is None else c for c in common], "D", ms=4, mfc="white", mec="black",
                    ls="none", label="accuracy on the turns every system covered" if k == 0 else None, zorder=4)
            for xp, v in zip(pos, vals):
                if np.isnan(v):   # no verdict at all (coverage 0): say so instead of an empty slot
                    ax.text(xp, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, groups, rotation=20)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"rule {rule}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("turn accuracy (turns with a verdict)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=max(1, len(ok) + 1), fontsize=8, frameon=False)
    fig.suptitle("turn accuracy per benchmark with 95% bootstrap intervals", fontsize=10, y=0.95)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_confusion(results: Results | Mapping[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    results = Results.of(results)
    claims = [(n, results.group(n, OVERALL).claim) for n in results.ok_systems()]
    items = [(n, c.confusion) for n, c in claims if c and c.confusion]
    fig, axes = plt.subplots(1, max(1, len(items)), figsize=(4.6 * max(1, len(items)), 4.4), squeeze=False)
    if not items:
        _no_data(axes[0][0], "no system produced stage 3 categories on matched human claims")
    for ax, (name, conf) in zip(axes[0], items):
        labels = conf["labels"]
        m = np.asarray(conf["matrix"])[: len(labels) - 1]     # the "(none)" row is always empty
        ax.imshow(m, cmap="Blues")
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, str(m[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if m[i, j] > m.max() / 2 else "black")
        short = [lab.replace("LACKING EVIDENCE", "LACKING\nEVIDENCE").replace("OUT-OF-SCOPE", "OUT-OF-\nSCOPE")
                 for lab in labels]
        ax.set_xticks(range(len(labels)), short, fontsize=7, rotation=45, ha="right")
        ax.set_yticks(range(len(labels) - 1), short[:-1], fontsize=7)
        ax.set_xlabel("predicted")
        ax.set_ylabel("human")
        ax.set_title(f"{name}: claim categories (matched)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_calibration(results: Results | Mapping[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    results = Results.of(results)
    colours = {n: f"C{i}" for i, n in enumerate(results.systems)}
    fig, ax = plt.subplots(figsize=(5, 4.6))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect", zorder=5)
    drawn = 0
    for name in results.ok_systems():
        claim = results.group(name, OVERALL).claim
        cal = (claim.stage2_calibration if claim else None) or Calibration()
        curve = cal.curve
        if curve:
            ax.plot(curve["mean_predicted"], curve["fraction_verified"], "o-", ms=4, color=colours[name],
                    label=f"{name} (ECE {cal.ece:.3f}, n {cal.n})")
            drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no stage 2 probabilities on matched claims", ha="center", fontsize=8)
    ax.set_xlabel("stage 2 P(VERIFIED)")
    ax.set_ylabel("share of matched claims VERIFIED by humans")
    ax.set_title("stage 2 calibration (all benchmarks)")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
