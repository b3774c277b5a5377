"""The paper's two baselines as engine programs, so they batch on the same backend as VISTA.

* ``llm_judge_program``: one request per scored turn with the Appendix A.2 prompt (conversation
  context, retrieved document, answer); the JSON answer's ``faithfulness`` is the verdict.
* ``factscore_program``: FActScore-style (Min et al., 2023): decompose the turn alone into atomic
  facts, check each against the reference alone (SUPPORTED / NOT SUPPORTED); the turn is faithful
  iff every fact is supported.

Both yield :class:`~vista_distill.pipeline.protocol.Request` lists and return one :class:`TurnResult` per assistant
turn, with ``verdicts`` under every rule in ``engine.RULES`` (the baselines have no out-of-scope or abstention category,
so the rules agree except where the authors' rule treats a failed answer), ``unknown_reason`` and the raw outputs.
FActScore claims carry ``category`` VERIFIED / UNVERIFIABLE and their probabilities in ``stage2`` (``probs`` keyed by
VERIFIED / UNVERIFIABLE), so claim matching and calibration read them like VISTA claims.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..data.schema import ASSISTANT, FAITHFUL, HALLUCINATED, UNKNOWN, UNVERIFIABLE, VERIFIED, Conversation
from ..pipeline.engine import (
    RULES,
    ClaimResult,
    Program,
    TurnResult,
    dedupe_claims,
    label_result,
    turn_verdict,
)
from ..pipeline.parsing import parse_claims, strip_think
from ..pipeline.protocol import Request, Response
from ..pipeline.templates import (
    Speakers,
    build_messages,
    factscore_decompose_input,
    factscore_verify_input,
    get_template,
    judge_input,
    world_judge_input,
)

SUPPORTED, NOT_SUPPORTED = "SUPPORTED", "NOT SUPPORTED"
_AS_STAGE2 = {SUPPORTED: VERIFIED, NOT_SUPPORTED: UNVERIFIABLE}


@dataclass
class BaselineConfig:
    speakers: Speakers = field(default_factory=Speakers)
    verify: str = "score"          # FActScore verification: "score" (label likelihood) or "generate"
    max_claims: int = 16
    max_new_tokens: dict[str, int] = field(
        default_factory=lambda: {"llm_judge": 128, "factscore_decompose": 256, "factscore_verify": 8})


@dataclass
class BaselineTurnResult(TurnResult):
    """A :class:`TurnResult` plus the baseline's name and, for the judge, its parsed answer."""

    baseline: str = ""
    judge: dict[str, Any] | None = None   # {"verdict", "explanation", "raw", "error", "parsed_from"}


def _turn_result(conv: Conversation, i: int, baseline: str) -> BaselineTurnResult:
    t = conv.turns[i]
    return BaselineTurnResult(
        baseline=baseline,
        conversation_id=conv.id, source=conv.source, turn_index=i, text=t.text, reference=t.reference,
        scored=t.is_scored, gold_label=t.gold_label,
        gold_claims=[asdict(c) for c in t.gold_claims] if t.gold_claims is not None else None,
    )


_JSON_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_JSON_FIELD = re.compile(r"faithfulness[\"']?\s*[:=]\s*[\"']?(faithful|hallucinated)\b", re.IGNORECASE)
_BARE = re.compile(r"^\W*(faithful|hallucinated)\b\W*", re.IGNORECASE)
_YES_NO = re.compile(r"^\W*(yes|no)\b[\s,.;:!-]*", re.IGNORECASE)


def parse_judge(text: str) -> tuple[str | None, str, str | None, str | None]:
    """(verdict, explanation, error, how) from the judge's answer, trying in order:

    ``json``: the JSON object's ``faithfulness``; ``field``: a broken-JSON ``faithfulness: ...``;
    ``bare``: an answer that starts with the verdict word; ``yes/no``: an answer that starts with Yes
    or No, read as the reply to the prompt's TASK question "Does the answer contain any hallucinated
    content?" (Yes = hallucinated). Other prose, e.g. "The answer contains no hallucinated content",
    is *not* read (a word search would call it hallucinated): it is unknown, with the reason.
    """
    answer, _ = strip_think(text)
    if not answer:
        return None, "", "empty output", None
    for m in _JSON_OBJECT.finditer(answer):
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(obj, dict):
            value = str(obj.get("faithfulness", "")).strip().lower()
            if value in (FAITHFUL, HALLUCINATED):
                return value, str(obj.get("explanation", "")), None, "json"
    for how, pattern in (("field", _JSON_FIELD), ("bare", _BARE)):
        m = pattern.search(answer)
        if m:
            return m.group(1).lower(), answer[m.end():].strip(' "\':,.}\n'), None, how
    m = _YES_NO.match(answer)
    if m:
        verdict = HALLUCINATED if m.group(1).lower() == "yes" else FAITHFUL
        return verdict, answer[m.end():].strip(), None, "yes/no"
    return None, "", f"no faithfulness verdict (JSON, verdict word or yes/no) in output {answer[:120]!r}", None


def llm_judge_program(conv: Conversation, cfg: BaselineConfig) -> Program:
    """LLM-as-Judge (Appendix A.2) over the scored turns of one conversation."""
    template = get_template("llm_judge", "fewshot")
    history = [(t.role, t.text) for t in conv.turns]
    results = [_turn_result(conv, i, "llm_judge") for i, t in enumerate(conv.turns) if t.role == ASSISTANT]
    scored = [r for r in results if r.scored]
    answers: list[Response] = (yield [
        Request("llm_judge", tuple(build_messages(
            template, judge_input(history[:r.turn_index], r.reference or "", r.text, cfg.speakers), cfg.speakers)),
            max_new_tokens=cfg.max_new_tokens["llm_judge"])
        for r in scored
    ]) if scored else []
    for res, resp in zip(scored, answers):
        verdict, explanation, error, how = parse_judge(resp.text)
        res.stage1_think = strip_think(resp.text)[1]
        res.judge = {"verdict": verdict, "explanation": explanation, "raw": resp.text, "error": error,
                     "parsed_from": how}
        for rule in RULES:
            res.verdicts[rule] = verdict or UNKNOWN
            res.vista_scores[rule] = None if verdict is None else float(verdict == FAITHFUL)
        res.unknown_reason = None if verdict else f"judge: {error}"
    return results


def factscore_program(conv: Conversation, cfg: BaselineConfig) -> Program:
    """FActScore-style decomposition (turn alone) and verification (reference alone)."""
    t_dec = get_template("factscore_decompose", "fewshot")
    t_ver = get_template("factscore_verify", "fewshot")
    results = [_turn_result(conv, i, "factscore") for i, t in enumerate(conv.turns) if t.role == ASSISTANT]
    scored = [r for r in results if r.scored]
    if not scored:
        return results
    decompositions = yield [
        Request("factscore_decompose", tuple(build_messages(t_dec, factscore_decompose_input(r.text), cfg.speakers)),
                max_new_tokens=cfg.max_new_tokens["factscore_decompose"], stop_on_repeat=True)
        for r in scored
    ]
    for res, dec in zip(scored, decompositions):
        raw_claims = parse_claims(dec.text)
        res.stage1_raw, res.stage1_think, res.n_claims_raw = dec.text, strip_think(dec.text)[1], len(raw_claims)
        res.claims = [ClaimResult(text=c) for c in dedupe_claims(raw_claims, cfg.max_claims)[0]]
    pending = [(res, c) for res in scored for c in res.claims]
    verdicts = (yield [
        Request("factscore_verify", tuple(build_messages(t_ver, factscore_verify_input(res.reference or "", c.text),
                                                         cfg.speakers)),
                labels=t_ver.labels if cfg.verify == "score" else (),
                max_new_tokens=cfg.max_new_tokens["factscore_verify"])
        for res, c in pending
    ]) if pending else []
    for (_res, c), resp in zip(pending, verdicts):
        label, info, c.error = label_result(resp, t_ver.labels)
        c.category = _AS_STAGE2.get(label) if label else None
        probs = info.get("probs")
        c.stage2 = {**info, "label": c.category, "factscore_label": label,
                    "probs": {_AS_STAGE2[k]: v for k, v in probs.items()} if probs else None}
    for res in scored:
        for rule in RULES:
            res.verdicts[rule], res.vista_scores[rule], reason = turn_verdict(res.claims, rule)
            res.unknown_reason = res.unknown_reason or reason
    return results


def world_judge_program(conv: Conversation, cfg: BaselineConfig) -> Program:
    """The mixed-context study's vanilla judge: one request per scored turn, the document and the text, three
    labels (faithful / factual / non-factual hallucination) picked by likelihood; the turn's
    ``world_verdict`` is that label, its VISTA verdicts faithful or hallucinated."""
    from ..pipeline.engine import FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION

    template = get_template("world_judge", "fewshot")
    as_verdict = dict(zip(template.labels, (FAITHFUL, FACTUAL_HALLUCINATION, NON_FACTUAL_HALLUCINATION)))
    results = [_turn_result(conv, i, "world_judge") for i, t in enumerate(conv.turns) if t.role == ASSISTANT]
    for res in results:
        res.world_gold = conv.turns[res.turn_index].meta.get("world_label")
    scored = [r for r in results if r.scored]
    answers: list[Response] = (yield [
        Request("world_judge", tuple(build_messages(template, world_judge_input(r.reference or "", r.text),
                                                    cfg.speakers)), labels=template.labels, max_new_tokens=16)
        for r in scored
    ]) if scored else []
    for res, resp in zip(scored, answers):
        label, info, error = label_result(resp, template.labels)
        res.judge = {**info, "error": error}
        res.world_verdict = as_verdict.get(label, UNKNOWN)
        res.world_reason = None if label else f"world judge: {error}"
        binary = None if label is None else (FAITHFUL if label == "FAITHFUL" else HALLUCINATED)
        for rule in RULES:
            res.verdicts[rule] = binary or UNKNOWN
            res.vista_scores[rule] = None if binary is None else float(binary == FAITHFUL)
        res.unknown_reason = res.world_reason
    return results


BASELINES: dict[str, Any] = {"llm_judge": llm_judge_program, "factscore": factscore_program,
                             "world_judge": world_judge_program}


def baseline_programs(name: str, conversations: list[Conversation], cfg: BaselineConfig) -> list[Program]:
    """Programs of baseline ``name`` (llm_judge | factscore) over ``conversations``."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; valid: {', '.join(BASELINES)}")
    return [BASELINES[name](c, cfg) for c in conversations]


__all__ = [
    "FAITHFUL",
    "HALLUCINATED",
    "NOT_SUPPORTED",
    "SUPPORTED",
    "UNKNOWN",
    "BaselineConfig",
    "baseline_programs",
    "factscore_program",
    "llm_judge_program",
    "parse_judge",
]
