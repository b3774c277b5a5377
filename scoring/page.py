"""One self-contained HTML page per score or eval run (``report.html``): the headline numbers and plots,
then every scored turn of every system — its reference, the background knowledge as numbered at that turn,
its claims coloured by category with probabilities, verdicts under each rule against gold, the raw model
outputs on demand — with filters (system, benchmark, wrong against gold, student and teacher disagree).
No external assets: plots are inlined as base64 PNG, styles and script are in the page.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..data.vocabulary import (
    ABSTENTION,
    CONTRADICTED,
    JOINS_BACKGROUND,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    VERIFIED,
)
from ..runtime.numbers import number
from ..runtime.numbers import percent as _pct

CATEGORY_COLOURS = {VERIFIED: "#1b7f3b", OUT_OF_SCOPE: "#5b6b7a", ABSTENTION: "#6a4fa3",
                    LACKING_EVIDENCE: "#b36b00", CONTRADICTED: "#b3261e", None: "#777"}

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}
#filters{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;z-index:2}
#filters label{margin-right:14px}.turn{border:1px solid #ddd;border-radius:6px;margin:10px 0;padding:8px 12px}
.turn.wrong{border-left:5px solid #b3261e}.meta{color:#666;font-size:12px}.claim{margin:2px 0;padding:2px 6px;
border-radius:4px;color:#fff;display:inline-block}.verdict{font-weight:600}.ok{color:#1b7f3b}.bad{color:#b3261e}
details{margin:4px 0}pre{white-space:pre-wrap;background:#f7f7f7;padding:6px;font-size:12px}img{max-width:100%}
.bg li{color:#444}
"""

SCRIPT = """
function applyFilters(){
  const sys=document.getElementById('f-system').value, src=document.getElementById('f-source').value;
  const wrong=document.getElementById('f-wrong').checked, dis=document.getElementById('f-disagree').checked;
  let n=0;
  document.querySelectorAll('.turn').forEach(t=>{
    const show=(sys==='all'||t.dataset.system===sys)&&(src==='all'||t.dataset.source===src)
      &&(!wrong||t.dataset.wrong==='1')&&(!dis||t.dataset.disagree==='1');
    t.style.display=show?'':'none'; if(show) n++;
  });
  document.getElementById('shown').textContent=n;
}
document.querySelectorAll('#filters select,#filters input').forEach(e=>e.addEventListener('change',applyFilters));
applyFilters();
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{_e(path.stem)}" src="data:image/png;base64,{data}">'


def _backgrounds(records: Sequence[Mapping[str, Any]], initial: Mapping[str, list[str]]) -> list[list[str]]:
    """The background each record's turn was verified against (the engine's accumulation, replayed)."""
    out, bg, conv = [], [], None
    for r in records:
        if r["conversation_id"] != conv:
            conv, bg = r["conversation_id"], list(initial.get(r["conversation_id"], []))
        out.append(list(bg))
        if not r["scored"]:
            bg += [c["text"] for c in r["claims"]]
        else:
            bg += [c["text"] for c in r["claims"] if c.get("category") in JOINS_BACKGROUND]
    return out


def _claim(c: Mapping[str, Any]) -> str:
    cat = c.get("category")
    probs = (c.get("stage3") or c.get("stage2") or {}).get("probs") or {}
    p = probs.get(cat) if cat else None
    tip = "; ".join(f"{k} {v:.2f}" for k, v in probs.items()) if probs else (c.get("error") or "")
    label = f"{_e(cat or 'unknown')}" + (f" {p:.2f}" if p is not None else "")
    world = c.get("world")
    if world:   # the world-knowledge stage's label and the passages it saw
        wp = (world.get("probs") or {}).get(world.get("label"))
        ev = "".join(f"<li>[{_e(e['source'])}] {_e(e['text'])}</li>" for e in world.get("evidence") or [])
        world_html = (f' <span class="meta">world: <b>{_e(world.get("label") or "unknown")}</b>'
                      + (f" {wp:.2f}" if wp is not None else "") + "</span>"
                      + (f"<details><summary>evidence ({len(world['evidence'])})</summary><ol>{ev}</ol></details>"
                         if ev else ""))
    else:
        world_html = ""
    return (f'<div><span class="claim" style="background:{CATEGORY_COLOURS.get(cat, "#777")}" title="{_e(tip)}">'
            f"{label}</span> {_e(c['text'])}{world_html}</div>")


def _turn(system: str, r: Mapping[str, Any], background: list[str], rules: Sequence[str], disagree: bool) -> str:
    gold = r.get("gold_label")
    head_rule = rules[0]
    wrong = gold is not None and r["verdicts"].get(head_rule) != gold
    verdicts = " · ".join(
        f'{_e(rule)}: <span class="verdict {"ok" if gold and v == gold else "bad" if gold else ""}">{_e(v)}</span>'
        for rule, v in r["verdicts"].items() if rule in rules)
    raw = [("stage 1", r.get("stage1_raw"))] + [
        (f"claim {i + 1} stage {s[-1]}", (c.get(s) or {}).get("raw")) for i, c in enumerate(r["claims"])
        for s in ("stage2", "stage3") if c.get(s)]
    raw_html = "".join(f"<b>{_e(k)}</b><pre>{_e(v)}</pre>" for k, v in raw if v)
    bg = "".join(f"<li>{_e(b)}</li>" for b in background) or "<li><i>none</i></li>"
    return (
        f'<div class="turn{" wrong" if wrong else ""}" data-system="{_e(system)}" data-source="{_e(r["source"])}" '
        f'data-wrong="{int(wrong)}" data-disagree="{int(disagree)}">'
        f'<div class="meta">{_e(system)} · {_e(r["source"])} · {_e(r["conversation_id"])} turn {r["turn_index"]}'
        f' · gold: <b>{_e(gold or "–")}</b> · {verdicts}'
        + (f' · three-way: <b>{_e(r["world_verdict"])}</b>' if r.get("world_verdict") else "")
        + (f' (gold {_e(r["world_gold"])})' if r.get("world_gold") else "") + "</div>"
        + f"<p>{_e(r['text'])}</p>"
        + "".join(_claim(c) for c in r["claims"])
        + (f"<div class='meta'>unknown: {_e(r['unknown_reason'])}</div>" if r.get("unknown_reason") else "")
        + f"<details><summary>reference</summary><pre>{_e(r.get('reference'))}</pre></details>"
        f"<details><summary>background knowledge ({len(background)})</summary><ol class='bg'>{bg}</ol></details>"
        f"<details><summary>raw model outputs</summary>{raw_html}</details></div>"
    )


def render_html(title: str, systems: Mapping[str, Sequence[Mapping[str, Any]]], *,
                headline: tuple[Sequence[str], Sequence[Sequence[Any]]] = ((), ()), plots: Sequence[Path] = (),
                rules: Sequence[str] = ("safe", "strict"), initial_background: Mapping[str, list[str]] | None = None,
                notes: Sequence[str] = (),
                tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]] = ()) -> str:
    """The page; ``systems`` maps a system name to its records (``TurnResult.to_dict()``, every turn);
    ``headline``: the (header, rows) table at the top (none without rows); ``tables``: more (title, header, rows)
    tables after it."""
    initial = initial_background or {}
    verdict_of = {s: {(r["conversation_id"], r["turn_index"]): r["verdicts"].get(rules[0]) for r in recs}
                  for s, recs in systems.items()}
    blocks, sources = [], set()
    for system, recs in systems.items():
        bgs = _backgrounds(recs, initial)
        for r, bg in zip(recs, bgs):
            if not r["scored"]:
                continue
            sources.add(r["source"])
            key = (r["conversation_id"], r["turn_index"])
            t, s = verdict_of.get("teacher", {}).get(key), verdict_of.get("student", {}).get(key)
            blocks.append(_turn(system, r, bg, rules, t is not None and s is not None and t != s))
    def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
        return (f"<table{cls}><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
                + "</table>")

    table = html_table(*headline) if headline[1] else ""
    for title_, header, rows in tables:
        table += f"<h2>{_e(title_)}</h2>" + html_table(header, rows, " class='evidence'")
    options = lambda xs: "".join(f'<option value="{_e(x)}">{_e(x)}</option>' for x in xs)  # noqa: E731
    legend = " ".join(f'<span class="claim" style="background:{c}">{_e(k or "unknown")}</span>'
                      for k, c in CATEGORY_COLOURS.items())
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{_e(title)}</h1>"
        + "".join(f"<p class='meta'>{_e(n)}</p>" for n in notes)
        + table
        + "".join(_img(p) for p in plots if Path(p).exists())
        + "<h2>Turns</h2><div id='filters'>"
        f"<label>system <select id='f-system'><option value='all'>all</option>{options(systems)}</select></label>"
        "<label>benchmark <select id='f-source'><option value='all'>all</option>"
        f"{options(sorted(sources))}</select></label>"
        f"<label><input type='checkbox' id='f-wrong'> wrong against gold ({_e(rules[0])})</label>"
        f"<label><input type='checkbox' id='f-disagree'> student and teacher disagree</label>"
        f"<span class='meta'><span id='shown'>{len(blocks)}</span> of {len(blocks)} turns shown</span>"
        f"<div class='meta'>{legend}</div></div>" + "".join(blocks) + f"<script>{SCRIPT}</script></body></html>\n"
    )


def write_html(path: str | Path, title: str, systems: Mapping[str, Sequence[Mapping[str, Any]]], **kw: Any) -> Path:
    from ..data.io import atomic_write_text

    path = Path(path)
    atomic_write_text(path, render_html(title, systems, **kw))
    return path


def eval_headline(results: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Rows: system, rule, turn accuracy, coverage, F1 (overall), from eval's results."""
    header = ["system", "rule", "turn accuracy %", "coverage %", "F1 (hallucinated)", "gold turns"]
    rows = []
    for system, m in results.get("metrics", {}).items():
        from .metrics import OVERALL

        overall = m.get(OVERALL) or next(iter(m.values()), {})
        for rule, t in (overall.get("turn") or {}).items():
            rows.append([system, rule, _pct(t.get("accuracy")), _pct(t.get("coverage")),
                         number(t.get("f1"), 3), t.get("n_gold")])
    return header, rows


EVIDENCE_HEADER = ["system", "edit flip rate", "edit AUC", "VERIFIED, low overlap", "unverifiable, high overlap",
                   "deletion flip rate", "own vs foreign reference AUC", "stage 2 accuracy", "claim-only accuracy",
                   "claims (edited / low / high / deleted / foreign / claim-only)"]


def evidence_rows(evidence: Mapping[str, Mapping[str, Any] | None]) -> list[list[Any]]:
    """One row per system of its evidence metrics (scoring/evidence.py), for report.md, report.html and the demo: the
    measures word overlap cannot pass first (edit probe, overlap-disagreement strata), then the three it passes."""
    def f(x: float | None) -> str:
        return number(x, 3)

    rows = []
    for name, e in evidence.items():
        if not e:
            continue
        strata = e.get("strata") or {}
        low, high = strata.get("verified_low_overlap") or {}, strata.get("unverifiable_high_overlap") or {}
        edit = e.get("edit") or {}
        rows.append([name, f(e.get("edit_flip_rate")), f(e.get("edit_auc")), _pct(low.get("accuracy")),
                     _pct(high.get("accuracy")), f(e.get("deletion_flip_rate")), f(e.get("foreign_reference_auc")),
                     _pct(e.get("accuracy")), _pct(e.get("claim_only_accuracy")),
                     f"{edit.get('claims', 0)} / {low.get('claims', 0)} / {high.get('claims', 0)} / "
                     f"{e['deletion']['claims']} / {e['foreign']['claims']} / {e['claim_only']['claims']}"])
    return rows


EVIDENCE_TITLE = "Does it read its evidence? (stage 2 on the human claims, scoring/evidence.py)"


def write_score_page(result: Any, path: str | Path) -> Path:
    """The HTML page of a ``VistaScorer.score`` run (a ``ScoreResult``) whose records are written at ``path``: every
    turn, the headline per rule and the evidence probes' table, at ``<stem>.report.html``. Returns its path."""
    path, summary = Path(path), result.summary
    rows = [[rule, _pct(r["coverage"]), (r.get("gold") or {}).get("accuracy"), r["verdicts"]]
            for rule, r in summary.get("by_rule", {}).items()]
    ev = evidence_rows({"scored": summary.get("evidence")})
    return write_html(path.with_name(path.stem + ".report.html"), f"VISTA scores: {path.name}",
                      {"scored": result.records},
                      headline=(["rule", "coverage %", "accuracy vs gold", "verdicts"], rows),
                      rules=list(summary.get("by_rule", {})) or ["safe"],
                      notes=[f"{summary.get('scored_turns')} scored turns; backend "
                             f"{(summary.get('run') or {}).get('backend')}"],
                      tables=[(EVIDENCE_TITLE, EVIDENCE_HEADER, ev)] if ev else [])


__all__ = ["EVIDENCE_HEADER", "EVIDENCE_TITLE", "eval_headline", "evidence_rows", "render_html", "write_html",
           "write_score_page"]
