"""The VISTA pipeline engine, shared by the teacher (distill/), the students and the baselines (eval/).

Each conversation is a *program*: a generator that runs the method strictly in order and yields
lists of :class:`Request` whenever it needs model output. The scheduler advances many programs
together and sends every ready request of a stage to the backend as one batch; run one at a time
(``batched=False``) it behaves like the authors' loop. Because backends answer each request
independently of its batch, both give the same output.

Per conversation (paper section 3; the authors' ``run_metric.py``):

* stage 1 decomposes every assistant turn given the history (history is fixed, so all turns are
  requested at once);
* for each scored turn in order: stage 2 labels each claim VERIFIED / UNVERIFIABLE against the
  numbered background knowledge plus the turn's reference; stage 3 categorises each UNVERIFIABLE
  claim; VERIFIED and OUT-OF-SCOPE claims then join the background;
* assistant turns without a reference add all their claims to the background and are not scored.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..data.schema import (
    ASSISTANT,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    STAGE2_LABELS,
    STAGE3_LABELS,
    UNKNOWN,
    UNVERIFIABLE,
    VERIFIED,
    Conversation,
)
from ..data.vocabulary import (  # noqa: F401 - the turn rules and world verdicts, re-exported
    AUTHORS,
    FACTUAL_HALLUCINATION,
    JOINS_BACKGROUND,
    NON_FACTUAL_HALLUCINATION,
    RULES,
    SAFE,
    SAFE_CATEGORIES,
    STAGE4_LABELS,
    STRICT,
    WORLD_FALSE,
    WORLD_LABELS,
    WORLD_TRUE,
    WORLD_VERDICTS,
)
from .chunking import Chunk, approx_tokens, chunk_context, combine
from .driver import RETRY_FACTOR, Program, run_programs, run_requests  # noqa: F401 (re-exported)
from .evidence import split_claims
from .knowledge import TurnContext, evidence_for
from .parsing import claim_key, parse_claim_list, parse_label, strip_think
from .protocol import Fields, Request, Response
from .templates import Speakers, get_template, stage_request


@dataclass
class EngineConfig:
    style: str = "fewshot"            # prompt style: "fewshot" (Appendix A.1) or "compact" (students)
    speakers: Speakers = field(default_factory=Speakers)
    stage2: str = "score"             # "score": pick a label by likelihood; "generate": free text, parsed
    stage3: str = "score"
    stage4: bool = False              # optional: does the turn contradict earlier turns?
    max_claims: int = 16              # guards against degenerate lists; claims beyond it are counted, not kept
    claims: str = "model"             # "gold": a turn with human claims takes them instead of stage 1
    # a turn whose stage 1 answer holds no usable claim (none, or only lines the parser drops; not a failed call)
    # is decomposed by the sentence splitter, its record says so (answered_by, stage1_fallback); False: unknown
    stage1_fallback: bool = True
    # stages 2-3: reference + background beyond this many tokens are judged in chunks (pipeline/chunking.py)
    context_budget: int | None = None
    count_tokens: Callable[[str], int] | None = None   # None: about four characters per token
    max_new_tokens: dict[str, int] = field(
        default_factory=lambda: {"stage1": 256, "stage2": 8, "stage3": 96, "stage4": 96}
    )
    # optional world-knowledge stage on LACKING EVIDENCE claims (off: records exactly as without it)
    world: bool = False
    world_knowledge: str | None = None   # a knowledge file or folder searched per claim; None: the model's own
    world_concurrent: bool = False       # also search the turn's reference and background with the claim
    world_top_k: int = 3                 # passages per source

    def __post_init__(self) -> None:
        for stage in ("stage2", "stage3"):
            if getattr(self, stage) not in ("score", "generate"):
                raise ValueError(f"{stage} mode must be 'score' or 'generate', got {getattr(self, stage)!r}")
        if self.claims not in ("model", "gold"):
            raise ValueError(f"claims must be 'model' or 'gold', got {self.claims!r}")


@dataclass
class Call:
    """One request the engine sent for a turn and the answer it used: the provenance of every output
    (silver data is built from these records, see ``distill/silver.py``)."""

    stage: str
    claim_index: int          # -1 for the turn's stage 1 and stage 4 requests
    input: str                # the stage's input fields rendered into the user message (any prompt style)
    request: Request
    response: Response


@dataclass
class ClaimResult:
    text: str
    category: str | None = None           # VERIFIED or a stage 3 category; None if unparseable
    stage2: dict[str, Any] | None = None  # {"label", "probs", "raw"}
    stage3: dict[str, Any] | None = None  # {"label", "probs", "raw", "explanation"}
    error: str | None = None
    world: dict[str, Any] | None = None   # world stage: {"label", "probs", "raw", "explanation", "evidence"}


@dataclass
class TurnKey:
    """Which turn a result is of, and whether it is scored (a context turn has no reference and no verdict)."""

    conversation_id: str
    source: str
    turn_index: int
    text: str
    reference: str | None
    scored: bool


@dataclass
class TurnResult(TurnKey):
    claims: list[ClaimResult] = field(default_factory=list)
    stage1_raw: str = ""
    stage1_think: str = ""
    n_claims_raw: int = 0
    stage1_truncated: bool = False        # the decomposition hit its token budget even after the retry
    # what the turn's decomposition lost, by reason: duplicate, over_max_claims, truncated_line (the line cut
    # at the token budget), looping_line (the line stopped because it kept repeating a sentence), refusal and
    # not_a_claim (lines of the answer that were not claims)
    claims_dropped: dict[str, int] = field(default_factory=dict)
    background_size: int = 0              # background facts the turn was verified against
    # what answered each stage of the turn: "model" (the backend), a rule or the human labels a calibration or an
    # attribution run put there (a response's meta "answered_by"), "human claims" (claims given), or
    # FALLBACK (stage 1 returned nothing usable)
    answered_by: dict[str, str] = field(default_factory=dict)
    stage1_fallback: bool = False
    stage4: dict[str, Any] | None = None
    verdicts: dict[str, str] = field(default_factory=dict)     # rule -> faithful / hallucinated / unknown
    vista_scores: dict[str, float | None] = field(default_factory=dict)
    unknown_reason: str | None = None
    gold_label: str | None = None
    gold_claims: list[dict[str, Any]] | None = None
    world_verdict: str | None = None      # with the world stage: one of WORLD_VERDICTS
    world_reason: str | None = None       # why the three-way verdict is unknown
    world_gold: str | None = None         # the data's three-way label, where it has one (FHSumBench)
    calls: list[Call] = field(default_factory=list, repr=False)   # not part of the record (to_dict)

    def to_dict(self) -> dict[str, Any]:
        calls, self.calls = self.calls, []
        try:
            out = asdict(self)
        finally:
            self.calls = calls
        del out["calls"]
        if out["world_gold"] is None:
            del out["world_gold"]
        if out["world_verdict"] is None:   # the stage was off: the record is what it was without it
            del out["world_verdict"], out["world_reason"]
            for c in out["claims"]:
                del c["world"]
        return out


def world_verdict(claims: Sequence[ClaimResult]) -> tuple[str, str | None]:
    """The three-way verdict of a turn with the world stage: non-factual hallucination when any claim is
    CONTRADICTED or any LACKING EVIDENCE claim is FALSE in the world; unknown when a claim's category could
    not be parsed or a LACKING EVIDENCE claim is neither TRUE nor FALSE (NOT ENOUGH KNOWLEDGE, unparsed);
    factual hallucination when there are LACKING EVIDENCE claims and all are TRUE; faithful otherwise."""
    if not claims:
        return UNKNOWN, "stage 1 returned no claims"
    lacking = [c for c in claims if c.category == LACKING_EVIDENCE]
    if any(c.category == CONTRADICTED for c in claims) or any((c.world or {}).get("label") == WORLD_FALSE
                                                              for c in lacking):
        return NON_FACTUAL_HALLUCINATION, None
    open_ = [c for c in claims if c.category is None] + [c for c in lacking
                                                        if (c.world or {}).get("label") != WORLD_TRUE]
    if open_:
        return UNKNOWN, "; ".join(
            f"claim {c.text!r}: " + (c.error or "no category") if c.category is None else
            f"claim {c.text!r}: world stage {(c.world or {}).get('label') or (c.world or {}).get('error')}"
            for c in open_)
    return (FACTUAL_HALLUCINATION if lacking else FAITHFUL), None


def turn_verdict(claims: Sequence[ClaimResult], rule: str) -> tuple[str, float | None, str | None]:
    """(verdict, VISTA score, unknown reason) of a turn under ``rule`` (see ``SAFE_CATEGORIES``)."""
    safe = SAFE_CATEGORIES[rule]
    if rule == AUTHORS:
        # a claim without a stage 2 label never reached the authors' turn record; a turn left empty is faithful
        claims = [c for c in claims if c.category is not None or (c.stage2 or {}).get("label") is not None]
        if not claims:
            return FAITHFUL, None, None
    if not claims:
        return UNKNOWN, None, "stage 1 returned no claims"
    bad = [c for c in claims if c.category is None]
    known = [c for c in claims if c.category is not None]
    score = sum(c.category in safe for c in known) / len(known) if known else None
    if bad:
        return UNKNOWN, score, "; ".join(f"claim {c.text!r}: {c.error}" for c in bad)
    return (FAITHFUL if all(c.category in safe for c in claims) else HALLUCINATED), score, None


MODEL = "model"
HUMAN_CLAIMS = "human claims"
FALLBACK = "sentence splitter (fallback)"


def answered_by(res: TurnResult) -> dict[str, str]:
    """Per stage of the turn, what answered it (its calls' ``answered_by``, ``model`` where none says)."""
    out: dict[str, str] = {}
    if not any(c.stage == "stage1" for c in res.calls):
        out["stage1"] = FALLBACK if res.stage1_fallback else HUMAN_CLAIMS
    for call in res.calls:
        who, have = call.response.meta.get("answered_by", MODEL), out.get(call.stage)
        out[call.stage] = who if have in (None, who) else ", ".join(sorted({*have.split(", "), who}))
    if res.stage1_fallback:
        out["stage1"] = FALLBACK
    return out


def dedupe_claims(claims: list[str], limit: int) -> tuple[list[str], int, int]:
    """(claims kept, duplicates dropped (:func:`.parsing.claim_key`), claims beyond ``limit`` dropped)."""
    seen, out = set(), []
    for c in claims:
        key = claim_key(c)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out[:limit], len(claims) - len(out), max(0, len(out) - limit)


def truncated(resp: Response) -> bool:
    """Did generation stop at its token budget (after the one retry the scheduler makes)?"""
    return resp.meta.get("finish_reason") == "length"


def label_result(resp: Response, labels: Sequence[str]) -> tuple[str | None, dict[str, Any], str | None]:
    # served models say how the label was scored (backends/server.py); a backend that weighed the evidence gives its
    # signals (backends/evidence_head.py: margin, PMI, overlap, whether a head decided)
    how = {k: resp.meta[k] for k in ("label_method", "bounded", "evidence") if k in resp.meta}
    if resp.label is not None:
        return resp.label, {"label": resp.label, "probs": resp.probs, "raw": resp.text, **how}, None
    parsed = parse_label(resp.text, labels)
    info = {"label": parsed.label, "probs": resp.probs, "raw": resp.text, "explanation": parsed.explanation, **how}
    error = parsed.error
    if error and resp.meta.get("error"):
        error = f"{error} ({resp.meta['error']})"
    return parsed.label, info, error


def vista_program(conv: Conversation, cfg: EngineConfig,
                  on_turn: Callable[[TurnResult], None] | None = None) -> Program:
    """Run VISTA over one conversation; returns the list of TurnResult of its assistant turns.

    Stage 1 (and the contradiction stage 4) of every assistant turn go out in one batch, as each decomposition
    reads only the history; stages 2-3 then run turn by turn, as each reads the background the turns before
    built."""
    sp = cfg.speakers

    def request(template, fields: Fields, **kw: Any) -> Request:
        return stage_request(template, fields, sp, **kw)

    history = [(t.role, t.text) for t in conv.turns]
    assistant = [i for i, t in enumerate(conv.turns) if t.role == ASSISTANT]
    given = {i for i in assistant if cfg.claims == "gold" and conv.turns[i].gold_claims is not None}
    decompose = [i for i in assistant if i not in given]
    t1 = get_template("stage1", cfg.style)
    turn_fields = {i: Fields(target=conv.turns[i].text, history=tuple(history[:i])) for i in assistant}
    first_reqs = [request(t1, turn_fields[i], max_new_tokens=cfg.max_new_tokens["stage1"], stop_on_repeat=True)
                  for i in decompose]
    if cfg.stage4:
        t4 = get_template("stage4", cfg.style)
        first_reqs += [request(t4, turn_fields[i], labels=t4.labels, max_new_tokens=cfg.max_new_tokens["stage4"])
                       for i in assistant]
    first = (yield first_reqs) if first_reqs else []
    first_calls = [Call(req.stage, -1, req.messages[-1]["content"], req, resp) for req, resp in zip(first_reqs, first)]
    decompositions = dict(zip(decompose, first[: len(decompose)]))
    stage1_calls = dict(zip(decompose, first_calls[: len(decompose)]))
    contradictions, stage4_calls = first[len(decompose):], first_calls[len(decompose):]

    background = list(conv.background)
    results: list[TurnResult] = []
    for k, i in enumerate(assistant):
        turn = conv.turns[i]
        res = _decomposed_turn(conv, i, decompositions.get(i), cfg, len(background))
        res.calls = ([stage1_calls[i]] if i in stage1_calls else []) + ([stage4_calls[k]] if contradictions else [])
        if contradictions:
            _, info, err = label_result(contradictions[k], STAGE4_LABELS)
            res.stage4 = {**info, "error": err}
        if not turn.is_scored:
            background += [c.text for c in res.claims]
        else:
            yield from _labelled_turn(res, background, turn.reference, cfg, request)
        res.answered_by = answered_by(res)
        results.append(res)
        if on_turn is not None:
            on_turn(res)
    return results


def splitter_claims(turn: str) -> list[str]:
    """The sentence splitter's claims of a turn, read as a stage 1 answer is read (a line that is no claim, such as
    "Sure!", dropped): what the splitter gives in stage 1's place, and the fallback."""
    return parse_claim_list("\n".join(f"{i}. {c}" for i, c in enumerate(split_claims(turn), 1))).claims


def _failed_call(resp: Response) -> bool:
    """The call itself failed (a server error), as against an answer that came back empty even after its retry."""
    return bool(resp.meta.get("error")) and not (resp.meta.get("retry") or {}).get("failed")


def _decomposed_turn(conv: Conversation, i: int, resp1: Response | None, cfg: EngineConfig,
                     background_size: int) -> TurnResult:
    """Turn ``i``'s result with its claims: parsed from its stage-1 answer ``resp1``, or, where that is None, the
    human claims as they are (no stage-1 request, nothing parsed or dropped); an answer with no usable claim gives
    the sentence splitter's claims (``cfg.stage1_fallback``)."""
    turn = conv.turns[i]
    if resp1 is None:
        raw, cut, looping = "", False, False
        kept = [c.text for c in turn.gold_claims]
        parsed_claims, duplicates, over, truncated_line, rejected = kept, 0, 0, None, []
        think = strip_think(raw)[1]
    else:
        raw = resp1.meta.get("raw") or resp1.text
        cut = truncated(resp1)
        looping = resp1.meta.get("finish_reason") == "loop"   # stopped inside a line that repeats itself
        parsed = parse_claim_list(resp1.text, truncated=cut or looping)
        kept, duplicates, over = dedupe_claims(parsed.claims, cfg.max_claims)
        parsed_claims, truncated_line, rejected = parsed.claims, parsed.truncated_line, parsed.rejected
        think = resp1.meta.get("think") or strip_think(raw)[1]
    res = TurnResult(
        conversation_id=conv.id, source=conv.source, turn_index=i, text=turn.text, reference=turn.reference,
        scored=turn.is_scored, stage1_raw=raw, stage1_think=think,
        n_claims_raw=len(parsed_claims), background_size=background_size, gold_label=turn.gold_label,
        gold_claims=[asdict(c) for c in turn.gold_claims] if turn.gold_claims is not None else None,
        stage1_truncated=cut, world_gold=turn.meta.get("world_label"),
    )
    dropped = {"duplicate": duplicates, "over_max_claims": over,
               "truncated_line": int(truncated_line is not None and not looping),
               "looping_line": int(truncated_line is not None and looping),
               "refusal": sum(why == "refusal" for _, why in rejected),
               "not_a_claim": sum(why != "refusal" for _, why in rejected)}
    res.claims_dropped = {r: n for r, n in dropped.items() if n}
    if resp1 is not None and resp1.meta.get("finish_reason") == "too_long":   # not run: past the context
        res.unknown_reason = f"stage 1: {resp1.meta['error']}"
    elif resp1 is not None and not kept and cfg.stage1_fallback and not _failed_call(resp1):
        kept = dedupe_claims(splitter_claims(turn.text), cfg.max_claims)[0]
        res.stage1_fallback = bool(kept)
    res.claims = [ClaimResult(text=c) for c in kept]
    return res


def _labelled_turn(res: TurnResult, background: list[str], reference: str | None, cfg: EngineConfig,
                   request: Callable[..., Request]) -> Generator[list[Request], list[Response], None]:
    """Stages 2 and 3 (and the world stage) over a scored turn's claims, one request per claim and chunk of the
    context (one chunk: exactly the method's requests); ``background`` gains the claims that join it, and the
    turn its verdicts."""
    claims = res.claims
    t2, t3 = get_template("stage2", cfg.style), get_template("stage3", cfg.style)
    chunks = ([Chunk(background, reference)] if not cfg.context_budget else
              chunk_context(background, reference or "", cfg.context_budget, cfg.count_tokens or approx_tokens))
    s2 = yield from _claim_requests(res, t2, range(len(claims)), chunks, cfg.stage2 == "score", cfg, request)
    for j, c in enumerate(claims):
        answers = [label_result(r, STAGE2_LABELS) for r in s2[j * len(chunks):(j + 1) * len(chunks)]]
        label, c.stage2, c.error = answers[0] if len(chunks) == 1 else combine("stage2", answers)
        if label == VERIFIED:
            c.category = VERIFIED
    unverifiable = [j for j, c in enumerate(claims) if c.stage2["label"] == UNVERIFIABLE]
    if unverifiable:
        s3 = yield from _claim_requests(res, t3, unverifiable, chunks, cfg.stage3 == "score", cfg, request)
        for k3, j in enumerate(unverifiable):
            c = claims[j]
            answers = [label_result(r, STAGE3_LABELS) for r in s3[k3 * len(chunks):(k3 + 1) * len(chunks)]]
            c.category, c.stage3, c.error = answers[0] if len(chunks) == 1 else combine("stage3", answers)
    if cfg.world:
        yield from _world_stage(res, claims, background, reference, cfg, request)
    background += [c.text for c in claims if c.category in JOINS_BACKGROUND]
    for rule in RULES:
        # the authors' code judges a turn stage 1 left empty faithful; the fallback's claims do not change that
        res.verdicts[rule], res.vista_scores[rule], reason = turn_verdict(
            [] if rule == AUTHORS and res.stage1_fallback else claims, rule)
        res.unknown_reason = res.unknown_reason or reason


def _claim_requests(res: TurnResult, template: Any, which: Sequence[int], chunks: Sequence[Chunk], score: bool,
                    cfg: EngineConfig, request: Callable[..., Request]
                    ) -> Generator[list[Request], list[Response], list[Response]]:
    """Ask ``template``'s stage about the claims ``which`` of a turn, one request per claim and chunk of the
    context (label requests when ``score``), record the calls and return the answers."""
    jobs = [(j, Fields(claim=res.claims[j].text, reference=ch.reference, background=tuple(ch.background),
                       first_fact=ch.first_fact)) for j in which for ch in chunks]
    reqs = [request(template, fields, labels=template.labels if score else (),
                    max_new_tokens=cfg.max_new_tokens[template.name]) for _, fields in jobs]
    answers = yield reqs
    res.calls += [Call(template.name, j, req.messages[-1]["content"], req, resp)
                  for (j, _), req, resp in zip(jobs, reqs, answers)]
    return answers


def _world_stage(res: TurnResult, claims: list[ClaimResult], background: list[str], reference: str | None,
                 cfg: EngineConfig, request: Callable[..., Request]) -> Generator[list[Request], list[Response], None]:
    """Ask the world stage about each LACKING EVIDENCE claim (with its evidence passages) and set the turn's
    three-way verdict."""
    lacking = [j for j, c in enumerate(claims) if c.category == LACKING_EVIDENCE]
    if lacking:
        tw = get_template("world", cfg.style)
        turn = TurnContext(reference, background) if cfg.world_concurrent else None   # indexed once per turn
        evidence = [evidence_for(claims[j].text, cfg.world_knowledge, cfg.world_top_k, turn) for j in lacking]
        jobs = [(j, Fields(claim=claims[j].text, evidence=tuple(p.text for p in ev)))
                for j, ev in zip(lacking, evidence)]
        reqs = [request(tw, fields, labels=tw.labels if cfg.stage3 == "score" else (),
                        max_new_tokens=cfg.max_new_tokens.get("world", 64)) for _, fields in jobs]
        answers = yield reqs
        res.calls += [Call("world", j, req.messages[-1]["content"], req, resp)
                      for (j, _), req, resp in zip(jobs, reqs, answers)]
        for (j, _), ev, resp in zip(jobs, evidence, answers):
            _label, info, err = label_result(resp, WORLD_LABELS)
            claims[j].world = {**info, "error": err, "evidence": [asdict(p) for p in ev]}
    res.world_verdict, res.world_reason = world_verdict(claims)
