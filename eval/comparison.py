"""The sections of ``results.json`` that compare: systems with each other (McNemar per pair, accuracy on
their common coverage, bootstrap intervals) and a run with an earlier one (fingerprint, differences)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..scoring import metrics as M
from ..scoring.significance import bootstrap_accuracy, paired_mcnemar
from .systems import SystemRun


def _pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def _paired_tests(correct: dict[str, dict], source_of: dict[str, dict], variant: str) -> dict[str, list]:
    """McNemar for every pair of systems over their common items, per benchmark and overall.
    ``correct[system][item]``: right or wrong; ``source_of[system][item]``: the item's benchmark."""
    out: dict[str, list] = {}
    for a, b in _pairs(list(correct)):
        common = sorted(set(correct[a]) & set(correct[b]))
        groups: dict[str, list] = {}
        for k in common:
            groups.setdefault(source_of[a][k], []).append(k)
        for group, keys in {**dict(sorted(groups.items())), M.OVERALL: common}.items():
            res = paired_mcnemar([correct[a][k] for k in keys], [correct[b][k] for k in keys], variant)
            out.setdefault(group, []).append({"system_1": a, "system_2": b, **res})
    return out


def significance(runs: dict[str, SystemRun], rules: Sequence[str], variant: str) -> dict[str, Any]:
    """McNemar for every pair of systems, per rule, per benchmark and overall (unknown = wrong)."""
    ok = [n for n, r in runs.items() if r.status == "ok" and r.records]   # not the claim-level-only ones
    sources = {n: {M.turn_key(r): r["source"] for r in M.gold_turns(runs[n].records)} for n in ok}
    return {rule: _paired_tests({n: M.correctness(runs[n].records, rule) for n in ok}, sources, variant)
            for rule in rules}


def given_claims_section(runs: dict[str, SystemRun], variant: str, n_bins: int = 10,
                         rules: Sequence[str] = ()) -> dict[str, Any] | None:
    """Claim level with the human claims given: each system's claim metrics per benchmark, its turn verdicts from
    those claims under each rule (``turns``: what a system that got the claims right would score), and McNemar for
    every pair of systems over the same claims (stage 2: VERIFIED vs not; and the five categories)."""
    given = {n: r.given_records for n, r in runs.items() if r.status == "ok" and r.given_records}
    if not given:
        return None
    out: dict[str, Any] = {"systems": {n: M.given_claims_metrics(rs, n_bins) for n, rs in given.items()},
                           "turns": {n: {rule: M.turn_summary(rs, rule) for rule in rules} for n, rs in given.items()},
                           "parts": {n: p for n, rs in given.items() if (p := M.head_parts(rs)) is not None},
                           "significance": {}}
    for level, binary in (("stage2", True), ("category", False)):
        correct = {n: M.claim_correctness(rs, binary) for n, rs in given.items()}
        sources = {n: {k: src[k[:2]] for k in correct[n]}
                   for n, src in ((n, {M.turn_key(r): r["source"] for r in rs}) for n, rs in given.items())}
        out["significance"][level] = _paired_tests(correct, sources, variant)
    return out


def add_common_coverage(metrics: dict[str, Any], runs: dict[str, SystemRun], rules: Sequence[str]) -> dict[str, Any]:
    """Accuracy over the gold turns every system that ran gave a verdict (``M.common_coverage``), per rule:
    written beside each system's own accuracy (``accuracy_common``, ``n_common``) and returned as
    ``{"systems": [...], "by_rule": {rule: {group: ...}}}``."""
    ok = {n: r.records for n, r in runs.items() if r.status == "ok" and r.records}
    by_rule = {rule: M.common_coverage(ok, rule) for rule in rules}
    for rule, groups in by_rule.items():
        for group, c in groups.items():
            for name in ok:
                t = metrics[name].get(group, {}).get("turn", {}).get(rule)
                if t is not None:
                    t.update(accuracy_common=c["accuracy"][name], n_common=c["n"])
    return {"systems": list(ok), "by_rule": by_rule}


def bootstrap_intervals(runs: dict[str, SystemRun], rules: Sequence[str], n_resamples: int,
                        seed: int) -> dict[str, Any]:
    """Seeded percentile intervals on accuracy (turns with a verdict) and accuracy_all (unknown = wrong)."""
    out: dict[str, Any] = {}
    for name, run in runs.items():
        if run.status != "ok" or not run.records:
            continue
        per: dict[str, Any] = {}
        for rule in rules:
            per[rule] = {}
            for group, rs in M.by_source(run.records).items():
                gold = M.gold_turns(rs)
                known = [r for r in gold if r["verdicts"].get(rule, "unknown") != "unknown"]
                per[rule][group] = {
                    "accuracy": bootstrap_accuracy([r["verdicts"][rule] == r["gold_label"] for r in known],
                                                   n_resamples, seed),
                    "accuracy_all": bootstrap_accuracy([r["verdicts"].get(rule) == r["gold_label"] for r in gold],
                                                       n_resamples, seed),
                }
        out[name] = per
    return out


def fingerprint(results: dict[str, Any]) -> str:
    """sha256 over everything that must be identical on a re-run (metrics, tests, intervals; no timings)."""
    keys = ("material", "metrics", "common_coverage", "majority", "significance", "bootstrap", "claim_matching")
    payload = json.dumps({k: results.get(k) for k in keys}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def compare_results(current: dict[str, Any], previous_path: str | Path) -> dict[str, Any]:
    """Compare the reproducible sections with an earlier ``results.json``; list the first differences."""
    prev = json.loads(Path(previous_path).read_text(encoding="utf-8"))
    diffs: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(diffs) >= 20:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b:
                    diffs.append(f"{path}.{k}: only in {'current' if k in a else 'previous'}")
                else:
                    walk(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            diffs.append(f"{path}: {b!r} -> {a!r}")

    for k in ("material", "metrics", "common_coverage", "majority", "significance", "bootstrap", "claim_matching"):
        walk(current.get(k), prev.get(k), k)
    return {"previous": str(previous_path), "previous_fingerprint": prev.get("fingerprint"),
            "identical": current["fingerprint"] == prev.get("fingerprint"), "differences": diffs}
