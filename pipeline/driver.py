"""Driving programs against a backend: a program (:func:`.engine.vista_program`) yields the requests it needs and
receives their answers; :func:`run_programs` gathers every ready program's requests into one backend call per
stage and retries generations cut at their budget (:func:`run_requests`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator, Iterable
from dataclasses import replace
from typing import Any

from .protocol import Backend, Request, Response

Program = Generator[list[Request], list[Response], Any]


RETRY_FACTOR = 2   # a generation cut at its budget, or empty, is asked once more with this many times the budget


def _needs_retry(req: Request, resp: Response) -> str | None:
    if req.labels and resp.label is not None:
        return None   # scored: a label was chosen, nothing was generated
    if resp.meta.get("finish_reason") == "length":
        return f"cut at its budget of {req.max_new_tokens} tokens"
    if not resp.text.strip() and not resp.meta.get("error"):
        return "empty answer" + (" (only a <think> block)" if resp.meta.get("think") else "")
    return None


def run_requests(backend: Backend, requests: list[Request],
                 on_issue: Callable[[str, int], None] | None = None) -> list[Response]:
    """``backend.run`` plus one retry, with ``RETRY_FACTOR`` x the token budget, of every generation that
    stopped at its budget or came back empty (a reasoning model's unfinished ``<think>`` block strips to
    nothing). What happened is kept in ``meta["retry"]``; a second failure stays visible as
    ``finish_reason`` "length" or an empty text (parsed as a failure with its reason, never silently empty)."""
    answers = backend.run(requests)
    again = [(i, why) for i, (r, a) in enumerate(zip(requests, answers)) if (why := _needs_retry(r, a))]
    if not again:
        return answers
    bigger = [replace(requests[i], max_new_tokens=requests[i].max_new_tokens * RETRY_FACTOR) for i, _ in again]
    if on_issue is not None:
        for stage, n in Counter(r.stage for r in bigger).items():
            on_issue(stage, n)
    for (i, why), req, resp in zip(again, bigger, backend.run(bigger)):
        failed = _needs_retry(req, resp)
        resp.meta["retry"] = {"reason": why, "budget": req.max_new_tokens, "failed": failed}
        if failed and not resp.meta.get("error") and not resp.text.strip():
            resp.meta["error"] = f"{failed} after a retry"
        answers[i] = resp
    return answers


def run_programs(
    programs: Iterable[Program],
    backend: Backend,
    batched: bool = True,
    on_issue: Callable[[str, int], None] | None = None,
) -> list[Any]:
    """Drive programs to completion and return their results in order.

    Batched: each round, every program's ready requests are gathered and each stage's requests go to
    the backend as one call. Unbatched: programs run one after another, one request per call.
    ``on_issue(stage, n)`` is told before ``n`` requests of ``stage`` go to the backend (retries included).
    """
    programs = list(programs)
    results: list[Any] = [None] * len(programs)
    if not batched:
        for p, prog in enumerate(programs):
            try:
                reqs = next(prog)
                while True:
                    answers = []
                    for r in reqs:
                        if on_issue is not None:
                            on_issue(r.stage, 1)
                        answers.append(run_requests(backend, [r], on_issue)[0])
                    reqs = prog.send(answers)
            except StopIteration as stop:
                results[p] = stop.value
        return results

    pending: dict[int, list[Request]] = {}
    for p, prog in enumerate(programs):
        try:
            pending[p] = next(prog)
        except StopIteration as stop:
            results[p] = stop.value
    while pending:
        by_stage: dict[str, list[tuple[int, int]]] = {}
        for p, reqs in pending.items():
            for j, r in enumerate(reqs):
                by_stage.setdefault(r.stage, []).append((p, j))
        answers: dict[int, list[Response | None]] = {p: [None] * len(r) for p, r in pending.items()}
        for stage, slots in by_stage.items():
            if on_issue is not None:
                on_issue(stage, len(slots))
            responses = run_requests(backend, [pending[p][j] for p, j in slots], on_issue)
            for (p, j), resp in zip(slots, responses):
                answers[p][j] = resp
        nxt: dict[int, list[Request]] = {}
        for p in pending:
            try:
                nxt[p] = programs[p].send(answers[p])
            except StopIteration as stop:
                results[p] = stop.value
        pending = nxt
    return results
