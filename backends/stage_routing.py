"""Backends around a backend, by stage: :class:`StageRouter` sends each request to the backend its stage is routed
to (a calibration that chose a rule at a stage, the attribution's runs with a rule or the human labels in one place;
:mod:`..scoring.attribution`), and :class:`RequestMemo` answers a request asked before from memory, so runs that
differ in one stage pay for that stage only. Both are backends themselves (:class:`..pipeline.protocol.Backend`)
and read through to the wrapped backend for everything else (its heads, priors, adapters)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..pipeline.protocol import Backend, Request, Response
from .label_memo import answer_copy
from .wrappers import ReadThrough


class StageRouter(ReadThrough):
    """``backend`` answers every request whose stage ``routes`` does not name; the routed stages' requests go to
    their backend (each answer says what gave it, in ``meta["answered_by"]``, where that backend says so). The
    order of the answers is the order of the requests. ``purpose`` says who put it there (``calibration``: a
    calibration's rules, which the next calibration applied replaces)."""

    def __init__(self, backend: Backend, routes: Mapping[str, Backend], purpose: str = "") -> None:
        super().__init__(backend)
        self.routes = dict(routes)
        self.purpose = purpose

    @ReadThrough.progress.setter
    def progress(self, fn: Callable[[int], None] | None) -> None:   # the routed stages' backends are told too
        self.inner.progress = fn
        for route in self.routes.values():
            route.progress = fn

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "routed": {s: b.describe() for s, b in sorted(self.routes.items())}}

    def run(self, requests: list[Request]) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        groups: dict[str | None, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.stage if r.stage in self.routes else None, []).append(i)
        for stage, idx in groups.items():
            backend = self.inner if stage is None else self.routes[stage]
            for i, resp in zip(idx, backend.run([requests[i] for i in idx])):
                out[i] = resp
        return out  # type: ignore[return-value]


def request_key(req: Request) -> str:
    return json.dumps([req.stage, list(req.messages), list(req.labels), req.max_new_tokens, req.stop_on_repeat],
                      ensure_ascii=False)


class RequestMemo(ReadThrough):
    """``backend`` with its answers kept in memory by request: a request asked again is answered with a copy of
    the first answer (backends answer each request the same whatever else is asked, so the answer is the one a
    second call would give). ``hits`` counts them; progress is told of them as of computed answers. The key holds
    the backend's state that changes answers (its heads, priors, evidence features), so a calibration applied
    between two calls is never answered from before it. ``serve`` false: answers are kept, every request still
    computed (a metered run keeps its own cost); set it true for the runs that may reuse them."""

    def __init__(self, backend: Backend, serve: bool = True) -> None:
        super().__init__(backend)
        self.serve = serve
        self.hits = 0
        self._answers: dict[str, Response] = {}

    def _state(self) -> str:
        state = {k: getattr(self.inner, k, None) for k in ("heads", "priors", "evidence_features", "routes")}
        return repr(sorted((k, sorted(v.items()) if isinstance(v, dict) else v) for k, v in state.items()))

    def run(self, requests: list[Request]) -> list[Response]:
        state = self._state()
        keys = [state + request_key(r) for r in requests]
        if not self.serve:
            answers = self.inner.run(requests)
            for k, resp in zip(keys, answers):
                self._answers.setdefault(k, answer_copy(resp))
            return answers
        missing = [i for i, k in enumerate(keys) if k not in self._answers]
        first = {}
        for i in missing:
            first.setdefault(keys[i], i)
        todo = sorted(first.values())
        if todo:
            for i, resp in zip(todo, self.inner.run([requests[i] for i in todo])):
                self._answers[keys[i]] = answer_copy(resp)
        hits = len(requests) - len(todo)
        self.hits += hits
        if hits and self.inner.progress is not None:
            self.inner.progress(hits)
        return [answer_copy(self._answers[k]) for k in keys]


__all__ = ["RequestMemo", "StageRouter", "request_key"]
