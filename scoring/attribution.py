"""Where a pipeline loses its turns: the turn accuracy of the pipeline as it runs beside the same pipeline with one
stage answered by something else, so a reader sees how many turns each stage costs and what a cheap rule would give
in its place.

Each row names what answers stages 1 and 3 (stage 2 is the system's in every row): the system itself, its cheap rule
(the sentence splitter at stage 1, the wording rule at stage 3: ``backends/cheap_baselines.py: StageRules``) or the
human annotation (the human claims in place of stage 1; at stage 3 each claim's human category, where it is one of
stage 3's four, the system's answer where the human says VERIFIED, a stage 2 miss stage 3 cannot mend). The rows
are ordered so that each differs from the one above in one stage, and McNemar's test pairs them on the same turns.

Every row is judged on the same turns: the scored gold-labelled turns that carry human claims, unknown counted as
wrong (coverage beside it). A system's own run comes first; the others go through a :class:`RequestMemo`, so a row
pays only for the requests its replacement changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..backends.cheap_baselines import RULE_NAMES, StageRules
from ..backends.human_labels import HUMAN_LABELS, LabelsBackend
from ..backends.stage_routing import RequestMemo, StageRouter
from ..data.schema import UNKNOWN, Conversation
from ..pipeline.engine import FALLBACK, HUMAN_CLAIMS, MODEL, EngineConfig
from ..runtime.numbers import percent, pvalue
from . import metrics as M
from .significance import paired_mcnemar

# (stage 1, stage 3) of each row: MODEL is the system
ROWS: tuple[tuple[str, str], ...] = (
    (RULE_NAMES["stage1"], MODEL),
    (MODEL, MODEL),                        # as it runs; the row below: what stage 1 costs
    (HUMAN_CLAIMS, MODEL),                 # the row below: what stage 3 costs
    (HUMAN_CLAIMS, HUMAN_LABELS),
    (HUMAN_CLAIMS, RULE_NAMES["stage3"]),
    (MODEL, RULE_NAMES["stage3"]),
)
AS_IT_RUNS = (MODEL, MODEL)


def row_name(stage1: str, stage3: str) -> str:
    return f"{stage1} | {stage3}"


def attributed(conversations: Sequence[Conversation]) -> list[Conversation]:
    """The conversations with a scored gold-labelled turn that carries human claims (the others add no row)."""
    return [c for c in conversations
            if any(c.turns[i].gold_claims and c.turns[i].gold_label is not None for i in c.scored_turns)]


def attribution_records(conversations: Sequence[Conversation], config: EngineConfig, backend: Any,
                        records: Sequence[dict[str, Any]] | None = None,
                        on_issue: Any = None) -> dict[str, list[dict[str, Any]]]:
    """Each row's records (:data:`ROWS`, by :func:`row_name`) over the :func:`attributed` conversations;
    ``records``: the system's own run over them, if it ran (else it runs here)."""
    from .run import run_pipeline

    convs = attributed(conversations)
    if not convs:
        return {}
    memo = backend if isinstance(backend, RequestMemo) else RequestMemo(backend)
    ids = {c.id for c in convs}
    out = {}
    for s1, s3 in ROWS:
        if (s1, s3) == AS_IT_RUNS and records is not None and config.claims == "model":
            out[row_name(s1, s3)] = [r for r in records if r["conversation_id"] in ids]
            continue
        routes: dict[str, Any] = {}
        if s1 == RULE_NAMES["stage1"]:
            routes["stage1"] = StageRules()
        if s3 == RULE_NAMES["stage3"]:
            routes["stage3"] = StageRules()
        elif s3 == HUMAN_LABELS:
            routes["stage3"] = LabelsBackend(convs, fallback=memo)
        cfg = dataclasses.replace(config, claims="gold" if s1 == HUMAN_CLAIMS else "model")
        out[row_name(s1, s3)] = run_pipeline(convs, cfg, StageRouter(memo, routes) if routes else memo,
                                             on_issue=on_issue)[0]
    return out


def _turns(runs: dict[str, list[dict[str, Any]]]) -> list[tuple[str, int]]:
    """The gold turns with human claims that every row scored."""
    keys = None
    for recs in runs.values():
        have = {M.turn_key(r) for r in M.gold_turns(recs) if r.get("gold_claims")}
        keys = have if keys is None else keys & have
    return sorted(keys or set())


def attribution_table(runs: dict[str, list[dict[str, Any]]], rule: str, variant: str = "exact",
                      system: str = "system") -> dict[str, Any] | None:
    """The rows under ``rule``: per row what answered stages 1-3, the turns, accuracy (unknown = wrong), coverage
    and the turns the splitter decomposed because stage 1 gave nothing usable; McNemar against the row above
    (``vs_above``) and against the pipeline as it runs (``vs_as_it_runs``). None when no row has a turn."""
    keys = _turns(runs)
    if not keys:
        return None
    rows: list[dict[str, Any]] = []
    prev: list[bool] | None = None
    as_it_runs = _right(runs.get(row_name(*AS_IT_RUNS)), keys, rule)
    for s1, s3 in ROWS:
        recs = runs.get(row_name(s1, s3))
        if recs is None:
            continue
        by_key = {M.turn_key(r): r for r in recs}
        right = _right(recs, keys, rule)
        known = sum(by_key[k]["verdicts"].get(rule, UNKNOWN) != UNKNOWN for k in keys)
        row: dict[str, Any] = {**{st: _component(nominal, system, by_key, keys, st)
                                  for st, nominal in (("stage1", s1), ("stage2", MODEL), ("stage3", s3))},
                               "turns": len(keys),
                               "accuracy": sum(right) / len(keys), "coverage": known / len(keys),
                               "stage1_fallback_turns": sum(bool(by_key[k].get("stage1_fallback")) for k in keys)}
        for name, other in (("vs_above", prev), ("vs_as_it_runs", as_it_runs)):
            if other is not None and (name == "vs_above" or (s1, s3) != AS_IT_RUNS):
                t = paired_mcnemar(right, other, variant)
                row[name] = {"delta": t["delta"], "pvalue": t["pvalue"], "b": t["b"], "c": t["c"]}
        rows.append(row)
        prev = right
    return {"rule": rule, "turns": len(keys), "system": system,
            "items": "scored gold-labelled turns with human claims; unknown counts as wrong", "rows": rows}


def _component(nominal: str, system: str, by_key: dict, keys: list[tuple[str, int]], stage: str) -> str:
    """What a row's cell names: the rule or the humans it put there, or the system, with what its records say
    answered in its place where that was not the model (a calibration's rule, say: ``student (wording rule)``)."""
    if nominal != MODEL:
        return nominal
    said = {w for k in keys for w in (by_key[k].get("answered_by") or {}).get(stage, MODEL).split(", ")}
    said -= {MODEL, FALLBACK}
    return f"{system} ({', '.join(sorted(said))})" if said else system


def _right(records: Sequence[dict[str, Any]] | None, keys: list[tuple[str, int]], rule: str) -> list[bool] | None:
    if records is None:
        return None
    by_key = {M.turn_key(r): r for r in records}
    return [by_key[k]["verdicts"].get(rule) == by_key[k]["gold_label"] for k in keys]


def fallback_summary(records: Sequence[dict[str, Any]], rules: Sequence[str]) -> dict[str, Any]:
    """The turns whose stage 1 gave nothing usable (decomposed by the splitter), and per rule, with them and without
    them: coverage over the scored turns, accuracy over the gold turns with a verdict."""
    scored = [r for r in records if r.get("scored")]

    def fig(rs: list[dict[str, Any]], rule: str) -> dict[str, Any]:
        known = [r for r in rs if r["verdicts"].get(rule, UNKNOWN) != UNKNOWN]
        gold = M.gold_turns(known)
        return {"turns": len(rs), "gold_turns": len(M.gold_turns(rs)),
                "coverage": len(known) / len(rs) if rs else None,
                "accuracy": sum(r["verdicts"].get(rule) == r["gold_label"] for r in gold) / len(gold) if gold else None}

    without = [r for r in scored if not r.get("stage1_fallback")]
    return {"turns": len(scored) - len(without),
            "by_rule": {rule: {"with": fig(scored, rule), "without": fig(without, rule)} for rule in rules}}


def attribution_rows(table: dict[str, Any] | None) -> list[list[str]]:
    """The table's rows as text cells: stage 1, stage 2, stage 3, turns right (%), coverage (%), Δ and p against
    the row above (terminal, report.md, page)."""
    out = []
    for r in (table or {}).get("rows", []):
        vs = r.get("vs_above")
        out.append([r["stage1"], r["stage2"], r["stage3"], percent(r["accuracy"]), percent(r["coverage"]),
                    percent(vs["delta"], signed=True) if vs else "", pvalue(vs["pvalue"], 2) if vs else ""])
    return out


ROW_HEADER = ["stage 1", "stage 2", "stage 3", "turns right", "coverage", "Δ vs above", "p"]

__all__ = ["ROWS", "ROW_HEADER", "attributed", "attribution_records", "attribution_rows", "attribution_table",
           "fallback_summary", "row_name"]
