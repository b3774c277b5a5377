"""scoring/terminal.py and the other closing tables: every table ``score``, ``eval`` and the demo print fits 100
columns, rendered as they are in a pipe or log file (rich at 200 columns there, so nothing is cropped by the
console); report.md and results.json keep the full tables."""

from __future__ import annotations

from types import SimpleNamespace

from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.data.io import read_conversations
from vista_distill.scorer import VistaScorer
from vista_distill.scoring.terminal import TERMINAL_WIDTH, print_score_summary

SYSTEMS = ("student", "base", "pmi", "overlap", "majority")   # recipes/demo-cpu.yaml's
EVIDENCE = {"edit_flip_rate": 0.4567, "edit_auc": 0.6123, "deletion_flip_rate": 0.25, "foreign_reference_auc": 0.7,
            "accuracy": 0.716, "claim_only_accuracy": 0.531, "edit": {"claims": 1234},
            "strata": {"verified_low_overlap": {"accuracy": 0.5, "claims": 123},
                       "unverifiable_high_overlap": {"accuracy": 0.25, "claims": 456}},
            "deletion": {"claims": 789}, "foreign": {"claims": 1011}, "claim_only": {"claims": 1213}}


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_score_summary_fits_100_columns(sample_path, capsys):
    """The score command's closing tables on a real summary (human claims given: evidence probes and cheap rules)."""
    convs = read_conversations(sample_path)
    scorer = VistaScorer(backend=LabelsBackend(convs), style="compact")
    scorer.majority = {"stage2": "VERIFIED", "stage3": "LACKING EVIDENCE"}
    summary = scorer.score(convs, evidence=True).summary
    assert {"evidence", "baselines"} <= set(summary)
    print_score_summary(summary)
    out = capsys.readouterr().out
    assert "does it read its evidence?" in out and "beside the cheap rules" in out and "accuracy vs gold" in out
    assert _widest(out) <= TERMINAL_WIDTH, out


def _results() -> dict:
    """An eval results.json shaped like the demo's: five systems, two at claim level only, one failed."""
    rules = ["safe", "strict"]
    pair = lambda other: {"system_1": "student", "system_2": other, "delta": -0.023, "n": 1340, "pvalue": 0.7123}  # noqa: E731
    turn = {r: {"accuracy": 0.6875, "coverage": 0.98, "accuracy_common": 0.7, "n_gold": 134} for r in rules}
    systems = {n: {"status": "ok", "evidence": EVIDENCE, "efficiency": {
        "turns_per_s": 1356.89 if n == "overlap" else 0.51, "wall_s": 321, "cache_hit_share": 1.0}} for n in SYSTEMS}
    systems["teacher"] = {"status": "error", "reason": "the server at http://127.0.0.1:8000/v1 did not answer "
                          "within 60 s (3 tries); see the log for the whole error", "efficiency": {}}
    return {"settings": {"rules": rules, "systems": [*SYSTEMS, "teacher"]}, "systems": systems,
            "metrics": {n: {"overall": {"turn": turn, "claim": {"accuracy": 0.7}}} for n in ("student", "overlap",
                                                                                             "majority")},
            "given_claims": {"systems": {n: {"overall": {"binary_accuracy": 0.716}} for n in SYSTEMS},
                             "parts": {"student": {"head_applied": True, "adapter_alone": 0.482}},
                             "significance": {"stage2": {"overall": [pair(o) for o in SYSTEMS[1:]]}}},
            "significance": {"by_rule": {r: {"overall": [pair(o) for o in ("overlap", "majority")]} for r in rules}},
            "tuned": {"systems": {n: {"threshold": 0.35, "fixed": 0.716, "tuned": 0.739, "pvalue": 0.12}
                                  for n in ("student", "pmi", "overlap")},
                      "student_vs_tuned": [pair(o) for o in ("pmi", "overlap")]},
            "material": {"conversations": 134, "gold_turns": 134, "human_claims": 1340},
            "wall_s": 612.0}


def test_demo_tables_fit_100_columns():
    from vista_distill.demo import _summary_tables
    from vista_distill.runtime.progress import console

    term = console(stderr=False)
    with term.capture() as cap:
        for table in _summary_tables(_results()):
            term.print(table)
    out = cap.get()
    assert "adapter, no head" in out and "claims (stage 2)" in out and "error: the server" in out
    assert "tuned" in out and "0.739" in out and out.count("claims, both tuned") == 2
    assert "1356.89 (100% from the call cache)" in out and "0.51 (100% from the call cache)" in out   # never folded
    assert _widest(out) <= TERMINAL_WIDTH, out
    assert len(out.splitlines()) <= 45, out   # the three tables of the demo's closing summary


def test_eval_summary_fits_100_columns(tmp_path, capsys):
    from vista_distill.eval.cli import print_eval_summary

    print_eval_summary(SimpleNamespace(results=_results(), out_dir=tmp_path))
    out = capsys.readouterr().out
    assert "claim level only" in out and "error:" in out
    assert _widest(out[:out.index("report:")]) <= TERMINAL_WIDTH, out   # the paths below are the user's
