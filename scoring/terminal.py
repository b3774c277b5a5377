"""The tables ``score``, ``eval`` and the demo print on the terminal, each within 100 columns: short two-line headers,
fewer columns than report.md and results.json (which keep every figure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..pipeline.engine import RULES
from ..runtime.numbers import number, percent
from ..runtime.progress import make_table, print_table
from .attribution import ROW_HEADER, attribution_rows
from .page import evidence_rows

TERMINAL_WIDTH = 100
# EVIDENCE_HEADER (page.py) without the claim counts of each probe, which stay in report.md and the page
EVIDENCE_TERMINAL_HEADER = ["system", "edit\nflips", "edit\nAUC", "VERIFIED\nlow ovl.", "unverif.\nhigh ovl.",
                            "deletion\nflips", "foreign\nref. AUC", "stage 2\nacc.", "claim\nonly acc."]
EVIDENCE_TERMINAL_TITLE = "does it read its evidence? (stage 2, human claims; scoring/evidence.py; counts in report.md)"


def evidence_table(evidence: Mapping[str, Mapping[str, Any] | None]):
    """The evidence metrics of each system (``evidence_rows``) as a terminal table, or None when there are none."""
    rows = [row[:len(EVIDENCE_TERMINAL_HEADER)] for row in evidence_rows(evidence)]
    return make_table(EVIDENCE_TERMINAL_TITLE, EVIDENCE_TERMINAL_HEADER, rows) if rows else None


def print_score_summary(s: Mapping[str, Any]) -> None:
    """``vista-distill score``'s closing tables from a run's summary (scoring/summary.py): verdicts per turn rule,
    the world stage, whether the scorer reads its evidence and the cheap baselines beside it (human claims given)."""
    from ..runtime.progress import console

    verdicts = sorted({v for r in s["by_rule"].values() for v in r["verdicts"]})
    rows = []
    for rule, r in s["by_rule"].items():
        gold = r["gold"] or {}
        acc = f"{gold['accuracy']:.3f} ({gold['n']}/{gold['n_gold']})" if gold.get("accuracy") is not None else None
        rows.append([rule, f"{r['coverage']:.3f}", *(r["verdicts"].get(v, 0) for v in verdicts), acc])
    print_table(f"scored {s['scored_turns']} turns in {s['conversations']} conversations "
                f"({s['context_turns']} context turns) in {s['run']['wall_s']:.0f}s",
                ["rule", "coverage", *verdicts, "accuracy vs gold\n(turns)"], rows)
    fb = s.get("stage1_fallback") or {}
    if fb.get("turns"):
        w = (fb["by_rule"].get(s["rule"]) or {}).get("without") or {}
        share = {k: percent(w.get(k), unit=" %", missing="-") for k in ("coverage", "accuracy")}
        console(stderr=False).print(
            f"stage 1 gave no usable claim on {fb['turns']} turn(s): the sentence splitter decomposed them; "
            f"without them, coverage {share['coverage']}, accuracy {share['accuracy']} ({s['rule']})")
    routed = {st: who for st, who in (s.get("answered_by") or {}).items() if set(who) - {"model", "human claims"}}
    if routed:
        console(stderr=False).print("answered by: " + "; ".join(
            f"{st} " + ", ".join(f"{k} {v}" for k, v in who.items()) for st, who in routed.items()))
    if "attribution" in s:
        a = s["attribution"]
        print_table(f"where the turns are lost: {a['turns']} gold turns with human claims, {a['rule']} rule "
                    "(unknown = wrong; McNemar against the row above)", ROW_HEADER, attribution_rows(a))
    if "world" in s:   # the world-knowledge stage ran
        w = s["world"]
        print_table(f"world stage: {w['claims_asked']} LACKING EVIDENCE claim(s) asked "
                    f"({', '.join(f'{k} {v}' for k, v in w['claim_labels'].items()) or 'none'})",
                    ["three-way verdict", "turns"], [[k, v] for k, v in w["verdicts"].items()])
    if "evidence" in s:   # the input has human claims: does the scorer read its evidence?
        console(stderr=False).print(evidence_table({"scored": s["evidence"]}))
    if "baselines" in s:   # the cheap baselines on the same human claims
        b = s["baselines"]
        tests = {t["system_2"]: t for t in b["mcnemar"]}
        pct = lambda x: number(x, 3, missing="-")  # noqa: E731
        print_table("beside the cheap rules (human claims given; McNemar of the scorer against each)",
                    ["system", "claims\n(stage 2)", *(f"turns\n{r}" for r in RULES), "claims", "p vs\nscorer"],
                    [[n, pct(c["accuracy"]), *(pct((b["turns"][n].get(r) or {}).get("accuracy")) for r in RULES),
                      c["n"], f"{tests[n]['pvalue']:.2g}" if n in tests else ""] for n, c in b["claims"].items()])


__all__ = ["EVIDENCE_TERMINAL_HEADER", "TERMINAL_WIDTH", "evidence_table", "print_score_summary"]
