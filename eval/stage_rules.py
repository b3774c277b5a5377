"""results.json's ``stage_rules``: each stage of each model-backed system beside the cheap rule of that stage, on the
same items, so a reader sees stage by stage what the model adds.

* stage 1, the sentence splitter (:func:`backends.cheap_baselines.decompose`): claim recall, precision and F1
  against the human claims, on the turns whose human claims are a full decomposition (a benchmark that gives one
  judged response as its claim, ``claims_complete: false``, has none);
* stage 2, the overlap rule (:func:`pipeline.evidence.overlap_says_verified`: half the claim's content words in the
  reference): VERIFIED or not on the human claims, paired with the system's stage 2 on the same claims;
* stage 3, the wording rule (:func:`backends.cheap_baselines.wording_category`): the category of each human claim
  that is unverifiable by its human label and that the system sent to stage 3, paired with the system's category.

Stages 2 and 3 come from the given-claims runs (``eval.given_claims``), stage 1 from the whole-pipeline runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..backends.cheap_baselines import decompose, wording_category
from ..data.schema import CLAIM_CATEGORIES, VERIFIED, Conversation
from ..pipeline.evidence import overlap_says_verified
from ..scoring import metrics as M
from ..scoring.significance import paired_mcnemar
from .result_parts import Fallback, StageRules
from .results import Results
from .systems import CHEAP_BASELINES, FIVE_LABEL_SYSTEMS, SystemRun

RULES = {"stage1": "sentence splitter", "stage2": "overlap rule (half the claim's content words in the reference)",
         "stage3": "wording rule (hedges -> ABSTENTION, opinion or first person -> OUT-OF-SCOPE, else LACKING "
                   "EVIDENCE)"}


def decomposed_turns(conversations: Sequence[Conversation]) -> set[tuple[str, int]]:
    """The turns whose human claims are a full decomposition (the ones stage 1 can be measured on)."""
    return {(c.id, i) for c in conversations for i, t in enumerate(c.turns)
            if t.gold_claims and t.meta.get("claims_complete") is not False}


def _claim_set(pairs: Sequence[tuple[list[str], list[str]]], matcher: M.ClaimMatcher) -> dict[str, Any]:
    """Recall, precision and F1 of predicted claims against human claims, matched one to one."""
    matched = sum(len(matcher.match(pred, gold)) for pred, gold in pairs)
    n_pred = sum(len(p) for p, _ in pairs)
    n_gold = sum(len(g) for _, g in pairs)
    recall = matched / n_gold if n_gold else None
    precision = matched / n_pred if n_pred else None
    f1 = 2 * recall * precision / (recall + precision) if recall and precision else 0.0
    return {"turns": len(pairs), "human_claims": n_gold, "predicted_claims": n_pred, "matched": matched,
            "recall": recall, "precision": precision, "f1": f1}


def _stage1(runs: dict[str, SystemRun], decomposed: set[tuple[str, int]], matcher: M.ClaimMatcher,
            ) -> dict[str, Any]:
    systems = {}
    rule_pairs: dict[tuple[str, int], tuple[list[str], list[str]]] = {}
    for name, run in runs.items():
        turns = [r for r in run.records if r.get("scored") and r.get("gold_claims") and M.turn_key(r) in decomposed]
        if not turns:
            continue
        gold = [[c["text"] for c in r["gold_claims"]] for r in turns]
        systems[name] = _claim_set([([c["text"] for c in r["claims"]], g) for r, g in zip(turns, gold)], matcher)
        systems[name]["rule"] = _claim_set([(decompose(r["text"]), g) for r, g in zip(turns, gold)], matcher)
        rule_pairs.update({M.turn_key(r): (decompose(r["text"]), g) for r, g in zip(turns, gold)})
    out: dict[str, Any] = {"rule": RULES["stage1"], "systems": systems}
    if rule_pairs:
        out["rule_alone"] = _claim_set(list(rule_pairs.values()), matcher)
    else:
        out["reason"] = "no turn of this material has a full human decomposition"
    return out


def _paired(rows: list[tuple[bool, bool]], variant: str) -> dict[str, Any]:
    res = paired_mcnemar([s for s, _ in rows], [r for _, r in rows], variant)
    return {"n": res["n"], "system_accuracy": res.get("accuracy_1"), "rule_accuracy": res.get("accuracy_2"),
            "delta": res.get("delta"), "pvalue": res["pvalue"], "b": res["b"], "c": res["c"]}


def _stage23(given: dict[str, list[dict[str, Any]]], variant: str) -> tuple[dict[str, Any], dict[str, Any]]:
    s2: dict[str, Any] = {}
    s3: dict[str, Any] = {}
    for name, records in given.items():
        rows2, rows3 = [], []
        for r in records:
            if not (r.get("scored") and r.get("gold_claims")):
                continue
            for gold, claim in zip(r["gold_claims"], r["claims"]):
                label = gold["label"]
                if label not in CLAIM_CATEGORIES:
                    continue
                verified = label == VERIFIED
                rows2.append(((claim.get("category") == VERIFIED) == verified,
                              overlap_says_verified(claim["text"], r.get("reference") or "") == verified))
                if not verified and claim.get("stage3"):
                    rows3.append((claim.get("category") == label, wording_category(claim["text"]) == label))
        if rows2:
            s2[name] = _paired(rows2, variant)
        if rows3:
            s3[name] = _paired(rows3, variant)
    return s2, s3


def stage_rules_section(runs: dict[str, SystemRun], conversations: Sequence[Conversation],
                        matcher: M.ClaimMatcher, variant: str) -> dict[str, Any] | None:
    """Each model-backed system against the rule of each stage (the module's docstring); None when no model-backed
    system ran. Per stage and system: n, the system's accuracy, the rule's, their difference and McNemar's p."""
    models = {n: r for n, r in runs.items() if r.status == "ok" and n in FIVE_LABEL_SYSTEMS - set(CHEAP_BASELINES)}
    if not models:
        return None
    given = {n: r.given_records for n, r in models.items() if r.given_records}
    s2, s3 = _stage23(given, variant)
    return {"rules": RULES,
            "stage1": _stage1({n: r for n, r in models.items() if r.records}, decomposed_turns(conversations), matcher),
            "stage2": {"rule": RULES["stage2"], "systems": s2},
            "stage3": {"rule": RULES["stage3"], "items": "human claims unverifiable by their label that the system "
                                                        "sent to stage 3", "systems": s3}}


def stage_rule_rows(section: StageRules | Mapping[str, Any] | None) -> list[tuple[str, str, int, float | None,
                                                                                  float | None, float | None]]:
    """(stage, system, items, the system's figure, the rule's, McNemar p) per stage and system: claim F1 against the
    human claims at stage 1 (no paired test), accuracy at stages 2 and 3."""
    if not section:
        return []
    section = section if isinstance(section, StageRules) else StageRules.from_dict(section)
    rows: list[tuple[str, str, int, float | None, float | None, float | None]] = []
    for name, s in section.stage1.systems.items():
        rows.append(("1 claims F1", name, s.human_claims, s.f1, s.rule["f1"], None))
    for stage, label in ((section.stage2, "2 verified?"), (section.stage3, "3 category")):
        for name, t in stage.systems.items():
            rows.append((label, name, t.n, t.system_accuracy, t.rule_accuracy, t.pvalue))
    return rows


def stage_rules_markdown(results: Results | Mapping[str, Any]) -> list[str]:
    """report.md's section of the stage rules."""
    from .report_format import _percent, _pvalue, markdown_table

    section = Results.of(results).stage_rules
    rows = stage_rule_rows(section)
    if not rows:
        return []
    rules = section.rules
    return ["## Stage by stage, beside each stage's rule", "",
            f"Stage 1 against the {rules['stage1']}: claim F1 against the human claims, matched as at the claim "
            f"level, on the turns whose human claims are a full decomposition"
            f"{' (' + section.stage1.reason + ')' if section.stage1.reason else ''}. "
            f"Stage 2 against the {rules['stage2']} and stage 3 against the {rules['stage3']}: accuracy on the same "
            "human claims (stage 3: those unverifiable by their label that the system sent to stage 3), McNemar "
            "pairing them.", "",
            markdown_table(["stage", "system", "items", "system", "rule", "Δ", "p"],
                           [[stage, name, n, _percent(a), _percent(b),
                             _percent(a - b) if a is not None and b is not None else "–", _pvalue(p)]
                            for stage, name, n, a, b, p in rows]), ""]


def _fallback_line(name: str, f: Fallback) -> str:
    from .report_format import _percent

    return (f"{name}: stage 1 gave no usable claim on {f.turns} scored turn(s), which the sentence "
            "splitter decomposed; over the gold turns, with them and without: " + "; ".join(
                f"{rule} accuracy {_percent(v['with']['accuracy'])} / {_percent(v['without']['accuracy'])}, "
                f"coverage {_percent(v['with']['coverage'])} / {_percent(v['without']['coverage'])}"
                for rule, v in f.by_rule.items()) + ".")


def attribution_markdown(results: Results | Mapping[str, Any]) -> list[str]:
    """report.md's section of the attribution (results.json ``attribution``; scoring/attribution.py): per system
    the rows under each turn rule, then the turns its stage 1 left to the splitter."""
    from ..scoring.attribution import ROW_HEADER, attribution_rows
    from .report_format import markdown_table

    section = Results.of(results).attribution or {}
    out: list[str] = []
    for name, entry in section.items():
        for rule, table in (entry.rows or {}).items():
            out += [f"### {name}, {rule} rule: {table['turns']} turns", "",
                    markdown_table(ROW_HEADER, attribution_rows(table)), ""]
    out += [_fallback_line(n, e.stage1_fallback) for n, e in section.items()
            if e.stage1_fallback and e.stage1_fallback.turns]
    if not out:
        return []
    return ["## Where the turns are lost, stage by stage", "",
            "Turn accuracy (%, unknown = wrong) of the pipeline as it runs beside the same pipeline with stage 1 or "
            "stage 3 answered by its cheap rule (the sentence splitter, the wording rule) or by the humans (their "
            "claims; their categories, where stage 3 can give them), on the same turns; each row differs from the "
            "one above in one stage, and McNemar's test pairs them.", "", *out, ""]


__all__ = ["RULES", "attribution_markdown", "decomposed_turns", "stage_rule_rows", "stage_rules_markdown",
           "stage_rules_section"]
