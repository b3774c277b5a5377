"""The one path a VISTA pipeline takes over conversations, for ``VistaScorer.score`` / ``VistaScorer.evidence``
and for eval's student and base: the whole pipeline (records appended to a journal per chunk, so a killed run
resumes) and stages 2-3 on the human claims with the evidence probes; stage 2 alone on (reference, claim)
pairs (``VistaScorer.label_claims``, MiniCheck's ``score(docs, claims)``); and the world stage again on finished records
(another world adapter or knowledge source on the same claims)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.schema import LACKING_EVIDENCE, Conversation
from ..data.vocabulary import WORLD_LABELS
from ..pipeline.engine import (
    STAGE2_LABELS,
    ClaimResult,
    EngineConfig,
    TurnResult,
    label_result,
    run_programs,
    vista_program,
    world_verdict,
)
from ..pipeline.knowledge import evidence_for
from ..pipeline.protocol import Fields
from ..pipeline.templates import get_template, stage_request
from .evidence import p_verified, run_probes


def records_of(results: Sequence[Sequence[TurnResult]]) -> list[dict[str, Any]]:
    """One record per assistant turn, conversation by conversation."""
    return [t.to_dict() for turns in results for t in turns]


@dataclass(frozen=True)
class Chunking:
    """How :func:`run_pipeline` journals a run: ``journal``, a file each ``chunk_size`` conversations' records are
    appended to as they finish (:mod:`..pipeline.journal`), keyed by the conversations, the engine settings,
    ``model`` (what identifies the backend) and the chunk size; None: no journal, one chunk."""

    journal: str | Path | None = None
    chunk_size: int = 16
    model: Any = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")


def run_pipeline(conversations: Sequence[Conversation], config: EngineConfig, backend: Any, *, batched: bool = True,
                 on_turn: Callable[[TurnResult], None] | None = None,
                 on_issue: Callable[[str, int], None] | None = None, chunking: Chunking | None = None,
                 on_resumed: Callable[[int], None] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The pipeline over ``conversations``: (records, journal info or None), journalled as ``chunking`` says; a rerun
    after a kill skips the chunks the journal holds (``on_resumed(n)`` with the number of records each holds;
    ``on_turn`` is told of computed turns only) and returns what one uninterrupted run returns."""
    from ..pipeline.journal import Journal, run_fingerprint

    chunking = chunking if chunking is not None else Chunking()
    journal, chunk_size = chunking.journal, chunking.chunk_size
    conversations = list(conversations)
    size = chunk_size if journal is not None else max(1, len(conversations))
    chunks = [conversations[i:i + size] for i in range(0, len(conversations), size)]
    log = done = None
    if journal is not None:
        log = Journal(journal, run_fingerprint(conversations, config, chunking.model, size))
        done = log.open()
    by_chunk: list[list[dict[str, Any]]] = []
    try:
        for k, chunk in enumerate(chunks):
            if done and str(k) in done:
                by_chunk.append(done[str(k)])
                if on_resumed is not None:
                    on_resumed(len(done[str(k)]))
                continue
            per_conv = run_programs((vista_program(c, config, on_turn) for c in chunk), backend, batched=batched,
                                    on_issue=on_issue)
            by_chunk.append(records_of(per_conv))
            if log is not None:
                log.append(str(k), by_chunk[-1])
    finally:
        if log is not None:
            log.release()
    info = None if journal is None else {"path": str(journal), "chunk_size": size, "chunks": len(chunks),
                                         "chunks_resumed": len(done or {})}
    return [r for chunk in by_chunk for r in chunk], info


def run_given_claims(conversations: Sequence[Conversation], config: EngineConfig, backend: Any, *,
                     evidence_seed: int | None = 0, on_issue: Callable[[str, int], None] | None = None,
                     reference_probes: Container[str] | None = None,
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stages 2-3 on the human claims of every turn that has them (no stage 1), and (with ``evidence_seed``) the
    evidence probes of that stage 2 (:mod:`.evidence`; the whole-reference probes on the ``reference_probes``
    conversations only, where given): (records, probe records)."""
    given = [c for c in conversations if any(c.turns[i].gold_claims for i in c.scored_turns)]
    if not given:
        return [], []
    gcfg = dataclasses.replace(config, claims="gold")
    results = run_programs([vista_program(c, gcfg) for c in given], backend, batched=True, on_issue=on_issue)
    probes = run_probes(results, backend, evidence_seed, on_issue, reference_probes) if evidence_seed is not None \
        else []
    return records_of(results), probes


def label_claims(references: Sequence[str], claims: Sequence[str], config: EngineConfig, backend: Any, *,
                 on_issue: Callable[[str, int], None] | None = None) -> list[dict[str, Any]]:
    """Stage 2 alone on each (reference, claim) pair, with no history and no background: the request the engine
    sends for a turn's first claims. One record per pair: ``label`` (VERIFIED / UNVERIFIABLE), ``p_verified``,
    ``probs``, ``error``."""
    if len(references) != len(claims):
        raise ValueError(f"{len(references)} references for {len(claims)} claims: give one reference per claim")
    t2 = get_template("stage2", config.style)
    requests = [stage_request(t2, Fields(claim=claim, reference=ref), config.speakers,
                              labels=t2.labels if config.stage2 == "score" else (),
                              max_new_tokens=config.max_new_tokens["stage2"]) for ref, claim in zip(references, claims)]
    if requests and on_issue is not None:
        on_issue("stage2", len(requests))
    out = []
    for resp in backend.run(requests) if requests else []:
        label, info, err = label_result(resp, STAGE2_LABELS)
        out.append({"label": label, "p_verified": p_verified(info), "probs": info.get("probs"), "error": err})
    return out


def rerun_world(records: Sequence[dict[str, Any]], config: EngineConfig, backend: Any, *,
                on_issue: Callable[[str, int], None] | None = None) -> list[dict[str, Any]]:
    """The world stage again on the LACKING EVIDENCE claims of pipeline records that ran it, stages 1-3 kept:
    the requests the engine sends (``config``'s prompts, knowledge and budgets), answered by ``backend`` (another
    world adapter, say). Copies of the records with the new ``world`` answers and three-way verdicts. A turn's own
    reference and background (``world_concurrent``) are not in the records, so that setting is refused."""
    if config.world_concurrent:
        raise ValueError("rerun_world: world_concurrent searches the turn's reference and background, which records "
                         "do not hold; rerun the pipeline instead")
    out = copy.deepcopy(list(records))
    jobs = [(i, k) for i, r in enumerate(out) if r.get("scored") and "world_verdict" in r
            for k, c in enumerate(r["claims"]) if c.get("category") == LACKING_EVIDENCE]
    tw = get_template("world", config.style)
    evidence = [evidence_for(out[i]["claims"][k]["text"], config.world_knowledge, config.world_top_k) for i, k in jobs]
    requests = [stage_request(tw, Fields(claim=out[i]["claims"][k]["text"], evidence=tuple(p.text for p in ev)),
                              config.speakers, labels=tw.labels if config.stage3 == "score" else (),
                              max_new_tokens=config.max_new_tokens.get("world", 64))
                for (i, k), ev in zip(jobs, evidence)]
    if requests and on_issue is not None:
        on_issue("world", len(requests))
    for (i, k), ev, resp in zip(jobs, evidence, backend.run(requests) if requests else []):
        _label, info, err = label_result(resp, WORLD_LABELS)
        out[i]["claims"][k]["world"] = {**info, "error": err, "evidence": [dataclasses.asdict(p) for p in ev]}
    fields = [f.name for f in dataclasses.fields(ClaimResult)]
    for r in out:
        if r.get("scored") and "world_verdict" in r:
            claims = [ClaimResult(**{f: c.get(f) for f in fields}) for c in r["claims"]]
            r["world_verdict"], r["world_reason"] = world_verdict(claims)
    return out
