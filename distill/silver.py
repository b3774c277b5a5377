"""From teacher pipeline results to silver training data: candidates, filters, export.

One *candidate* per teacher call: stage 1 per assistant turn, stage 2 per claim of a scored turn,
stage 3 per UNVERIFIABLE claim, each read from the engine's record of the call (``TurnResult.calls``:
the stage's input fields and the teacher's request and response), so the student prompt is
``build_messages(get_template(stage, student_style), target_input)`` over the very input the teacher saw.

Filters, in order, each recorded as the candidate's drop reason: parse failure; the turn's verdict
disagrees with the gold turn label (or is unknown) when ``filter_gold_agreement``; self-consistency
agreement below the threshold; duplicate student prompt; class balance (stages 2 and 3, train
split only). Splits are by dialogue (``data.splits.split_by_dialogue``). With ``distill.augment_falsified``
> 0, ``augment.py`` adds VERIFIED / CONTRADICTED candidates made by rule from the train split's references
(``extra["teacher"]`` and ``extra["augment"]`` set; the same filters from dedup on).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.schema import TURN_LABELS, UNKNOWN, Conversation
from ..data.silver import COLUMNS, clean_partial, features, save_stage  # noqa: F401 - distill's export
from ..data.splits import dialogue_key, split_by_dialogue
from ..data.vocabulary import DISTILLED_STAGES, STAGES
from ..pipeline.engine import Call, TurnResult
from ..pipeline.templates import PROMPTS_VERSION, Speakers, build_messages, get_template

DROP_REASONS = (
    "parse failure",
    "truncated",
    "verdict unknown",
    "gold disagreement",
    "partial claims",
    "self-consistency",
    "duplicate",
    "class balance",
)


# the ``teacher`` of rows made by rule (distill/augment.py), by kind
RULE_TEACHERS = {"falsified": "rule:falsify", "swapped": "rule:swap-reference",
                 # evidence-contrast rows (distill/contrast.py)
                 "deletion": "rule:delete-support", "edit": "rule:edit-support", "insertion": "rule:insert-claim",
                 "foreign": "rule:foreign-reference"}


@dataclass
class Candidate:
    stage: str
    conversation_id: str
    dialogue_id: str
    source: str
    turn_index: int
    claim_index: int              # -1 for stage 1
    claim: str
    target_input: str             # the stage's target user message (teacher and student prompts share it)
    completion: str
    label: str
    parsed: dict[str, Any]
    response: Any = None          # the teacher's Response (provenance)
    error: str | None = None
    agreement: float | None = None
    gold_label: str | None = None
    teacher_verdict: str | None = None
    drop: str | None = None
    drop_detail: str | None = None
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def reject(self, reason: str, detail: str | None = None) -> None:
        if self.drop is None:
            self.drop, self.drop_detail = reason, detail


@dataclass
class FilterSettings:
    rule: str = "safe"
    gold_agreement: bool = True
    self_consistency_k: int = 1
    min_agreement: float = 0.5
    dedup: bool = True
    balance: bool = False
    balance_max_ratio: float = 1.0
    validation_fraction: float = 0.1
    seed: int = 0


def numbered(claims: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def collect_candidates(conversations: Sequence[Conversation], results: Sequence[Sequence[TurnResult]],
                       settings: FilterSettings) -> list[Candidate]:
    """Candidates of every teacher call the engine recorded, with parse, gold and self-consistency
    filters applied."""
    out: list[Candidate] = []
    for conv, turns in zip(conversations, results):
        base = {"conversation_id": conv.id, "dialogue_id": dialogue_key(conv), "source": conv.source}
        for res in turns:
            i = res.turn_index
            turn_drop: tuple[str, str] | None = None
            verdict = res.verdicts.get(settings.rule) if res.scored else None
            if settings.gold_agreement and res.scored and res.gold_label in TURN_LABELS:
                if verdict == UNKNOWN:
                    turn_drop = ("verdict unknown", f"turn verdict unknown: {res.unknown_reason}")
                elif verdict != res.gold_label:
                    turn_drop = ("gold disagreement", f"teacher says {verdict}, gold says {res.gold_label}")
            turn_info = {"gold_label": res.gold_label, "teacher_verdict": verdict, "turn_index": i}
            # the order candidates had when they were rebuilt claim by claim: dedup keeps the first
            for call in sorted(res.calls, key=lambda c: (c.stage != "stage1", c.claim_index, c.stage)):
                if call.stage == "stage1":
                    out.append(_stage1(res, call, conv, base, turn_info, turn_drop))
                elif call.stage in ("stage2", "stage3", "world"):
                    out.append(_labelled(res, call, base, turn_info, turn_drop, settings))
    return out


def _stage1(res: TurnResult, call: Call, conv: Conversation, base: dict[str, str], turn_info: dict[str, Any],
            turn_drop: tuple[str, str] | None) -> Candidate:
    claims = [c.text for c in res.claims]
    c1 = Candidate("stage1", **base, claim_index=-1, claim="", target_input=call.input, completion=numbered(claims),
                   label="", parsed={"claims": claims, "n_claims_raw": res.n_claims_raw}, response=call.response,
                   **turn_info)
    if not claims:
        c1.error = f"stage 1: {call.response.meta.get('error') or 'no claims in output'}"
        c1.reject("parse failure", c1.error)
    elif res.stage1_truncated:   # an incomplete list would teach the student to leave claims out
        c1.reject("truncated", "stage 1 answer cut at its token budget after a retry")
    elif turn_drop:
        c1.reject(*turn_drop)
    elif conv.turns[res.turn_index].meta.get("claims_complete") is False:
        # e.g. FineDialFact annotates a few facts of a turn: good stage 2/3 data, no decomposition
        c1.reject("partial claims", "the data annotates only some claims of this turn")
    return c1


def _labelled(res: TurnResult, call: Call, base: dict[str, str], turn_info: dict[str, Any],
              turn_drop: tuple[str, str] | None, settings: FilterSettings) -> Candidate:
    claim = res.claims[call.claim_index]
    info = {"stage2": claim.stage2, "stage3": claim.stage3, "world": claim.world}[call.stage] or {}
    label = info.get("label")
    parsed: dict[str, Any] = {"label": label}
    completion = label or ""
    if call.stage in ("stage3", "world"):
        parsed["explanation"] = expl = _one_line(info.get("explanation") or "")
        completion = f"{label}. {expl}" if expl else completion
    cand = Candidate(call.stage, **base, claim_index=call.claim_index, claim=claim.text, target_input=call.input,
                     completion=completion, label=label or "", parsed=parsed, response=call.response, **turn_info)
    _judge(cand, label, info, claim.error, turn_drop, settings)
    return cand


def _judge(cand: Candidate, label: str | None, info: dict[str, Any], error: str | None,
           turn_drop: tuple[str, str] | None, settings: FilterSettings) -> None:
    if label is None:
        cand.error = f"{cand.stage}: {error or 'no label in output'}"
        cand.reject("parse failure", cand.error)
        return
    if turn_drop:
        cand.reject(*turn_drop)
    if settings.self_consistency_k > 1:
        cand.agreement = float((info.get("probs") or {}).get(label, 0.0))
        if cand.agreement < settings.min_agreement:
            cand.reject("self-consistency", f"{cand.agreement:.2f} of {settings.self_consistency_k} samples "
                                            f"agree with {label} (< {settings.min_agreement})")


def dialogue_splits(conversations: Sequence[Conversation], settings: FilterSettings) -> dict[str, str]:
    """``dialogue_key`` -> "train" / "validation" (``settings.validation_fraction`` of the dialogues, seeded)."""
    f = settings.validation_fraction
    parts = split_by_dialogue(conversations, {"train": 1.0 - f, "validation": f}, seed=settings.seed) if f > 0 \
        else {"train": list(conversations), "validation": []}
    return {dialogue_key(c): name for name, convs in parts.items() for c in convs}


def apply_split_and_filters(conversations: Sequence[Conversation], candidates: list[Candidate],
                            settings: FilterSettings) -> None:
    """Assign splits by dialogue, then dedup and (optionally) balance the kept candidates in place."""
    where = dialogue_splits(conversations, settings)
    for cand in candidates:
        cand.split = where[cand.dialogue_id]
    if settings.dedup:
        seen: dict[tuple[str, str], Candidate] = {}
        for cand in candidates:
            if cand.drop is not None:
                continue
            first = seen.setdefault((cand.stage, cand.target_input), cand)
            if first is not cand:
                cand.reject("duplicate", f"same {cand.stage} prompt as {first.conversation_id} turn {first.turn_index}")
    if settings.balance:
        for stage in ("stage2", "stage3", "world"):
            kept = [c for c in candidates if c.stage == stage and c.drop is None and c.split == "train"]
            counts = Counter(c.label for c in kept)
            if len(counts) < 2:
                continue
            cap = max(1, math.ceil(min(counts.values()) * settings.balance_max_ratio))
            for label, n in counts.items():
                if n <= cap:
                    continue
                group = sorted((c for c in kept if c.label == label),
                               key=lambda c: hashlib.sha256((c.target_input + c.completion).encode()).hexdigest())
                for c in group[cap:]:
                    c.reject("class balance", f"{label}: {n} train examples capped at {cap}")


# ---------------------------------------------------------------------------------------------- export


def rows(candidates: Sequence[Candidate], stage: str, split: str, student_style: str, speakers: Speakers,
         teacher: str) -> list[dict[str, Any]]:
    template = get_template(stage, student_style)
    return [{
        "prompt": build_messages(template, c.target_input, speakers),
        "completion": [{"role": "assistant", "content": c.completion}],
        "label": c.label, "stage": stage, "conversation_id": c.conversation_id, "dialogue_id": c.dialogue_id,
        "source": c.source, "teacher": c.extra.get("teacher", teacher), "prompt_style": student_style,
        "prompt_version": PROMPTS_VERSION,
    } for c in candidates if c.stage == stage and c.split == split and c.drop is None]


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def stages_for(world: bool) -> tuple[str, ...]:
    """The stages a distill run exports: stages 1-3, and the world stage when the recipe turns it on."""
    return DISTILLED_STAGES if world else STAGES


def filter_report(candidates: Sequence[Candidate], stages: Sequence[str] = STAGES) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for stage in stages:
        cs = [c for c in candidates if c.stage == stage]
        dropped = Counter(c.drop for c in cs if c.drop is not None)
        report[stage] = {"candidates": len(cs), "kept": sum(c.drop is None for c in cs),
                         "dropped": {r: dropped[r] for r in DROP_REASONS if dropped[r]}}
        for kind, teacher in RULE_TEACHERS.items():
            made = [c for c in cs if c.extra.get("teacher") == teacher]   # rule-made rows (distill/augment.py)
            if made:
                report[stage][kind] = {"candidates": len(made), "kept": sum(c.drop is None for c in made)}
    return report


def stage_counts(data: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stage, splits in data.items():
        out[stage] = {split: {"examples": len(rs), "dialogues": len({r["dialogue_id"] for r in rs}),
                              "labels": dict(sorted(Counter(r["label"] for r in rs if r["label"]).items()))}
                      for split, rs in splits.items()}
    return out


STAGE_TITLES = {"stage1": "claim decomposition", "stage2": "claim verification (VERIFIED / UNVERIFIABLE)",
                "stage3": "unverifiable claim categorisation",
                "world": "world knowledge of LACKING EVIDENCE claims (TRUE / FALSE / NOT ENOUGH KNOWLEDGE)"}


def card(stage: str, counts: dict[str, Any], report: dict[str, Any], manifest: dict[str, Any]) -> str:
    """The dataset card (README.md) of one stage folder."""
    t = manifest["teacher_config"]
    lines = [
        "---", "pretty_name: VISTA silver data, " + stage, "task_categories:", "- text-generation",
        "tags:", "- vista", "- factuality", "- distillation", "---", "",
        f"# VISTA silver data — {stage}: {STAGE_TITLES[stage]}", "",
        f"Written by `vista-distill distill` (recipe `{manifest['recipe']}`). Teacher: **{t['name']}** "
        f"(backend {t['backend']}, its prompts: {t['prompt_style']}, temperature {t['temperature']}"
        + (f", self-consistency k={t['self_consistency']['k']}" if t.get("self_consistency") else "") + ").",
        (f"Student prompt in `prompt`: **{manifest['student_prompt_style']}**, prompts version "
         f"{manifest['prompt_version']}. Split by dialogue (`dialogue_id`); the train material was checked "
         "for leaks against the recipe's test material."), "",
        "| split | examples | dialogues |", "|---|---:|---:|",
        *[f"| {s} | {c['examples']} | {c['dialogues']} |" for s, c in counts.items()], "",
    ]
    labels = sorted({lab for c in counts.values() for lab in c["labels"]})
    if labels:
        lines += ["Label balance:", "", "| label | " + " | ".join(counts) + " |",
                  "|---|" + "---:|" * len(counts)]
        for lab in labels:
            cells = []
            for c in counts.values():
                n, total = c["labels"].get(lab, 0), c["examples"]
                cells.append(f"{n} ({n / total:.0%})" if total else "0")
            lines.append(f"| {lab} | " + " | ".join(cells) + " |")
        lines.append("")
    dropped = ", ".join(f"{r}: {n}" for r, n in report["dropped"].items()) or "none"
    lines += [
        f"Filters: {report['candidates']} teacher answers, {report['kept']} kept; dropped — {dropped}.", "",
        *([(f"Of these, {report['falsified']['candidates']} are VERIFIED / CONTRADICTED examples made by rule from "
            f"the references ({report['falsified']['kept']} kept, train split only; `teacher` rule:falsify, "
            "`source` ending in +falsified)."), ""] if "falsified" in report else []),
        *([(f"Of these, {report['swapped']['candidates']} are UNVERIFIABLE copies of VERIFIED claims against another "
            f"training dialogue's reference ({report['swapped']['kept']} kept, train split only; `teacher` "
            "rule:swap-reference, `source` ending in +swapped)."), ""] if "swapped" in report else []),
        *([("Evidence-contrast rows (the same claim, its reference edited to flip its label; train split only; "
            "`source` ending in +contrast): " + ", ".join(
                f"{report[k]['candidates']} {k} ({report[k]['kept']} kept, `teacher` {RULE_TEACHERS[k]})"
                for k in ("deletion", "edit", "foreign", "insertion") if k in report) + "."), ""]
          if any(k in report for k in ("deletion", "edit", "foreign", "insertion")) else []),
        ("Columns: `prompt` (system + user messages), `completion` (the teacher's answer as one assistant "
         "message), `label`, `stage`, `conversation_id`, `dialogue_id`, `source`, `teacher`, `prompt_style`, "
         "`prompt_version`."), "",
        f"Data fingerprint (sha256 over the rows): `{manifest['fingerprints'][stage]}`.", "",
        "```python", "from datasets import load_from_disk", f"ds = load_from_disk('{stage}')", "```", "",
    ]
    return "\n".join(lines)
