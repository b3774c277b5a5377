"""Wrappers around any backend: what every wrapper passes through to the backend it wraps (:class:`Wrapper`; with
every other attribute read through too, :class:`ReadThrough`), answers cached on disk per request
(:class:`CachedBackend`) and self-consistency votes over sampled answers (:class:`VotingBackend`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..data.vocabulary import LABELS
from ..pipeline.parsing import parse_label
from ..pipeline.protocol import Backend, Request, Response
from .cache import CallCache, call_key, messages_digest
from .openai_compat import OpenAIBackend, ServerError

VOTED_STAGES = {stage: LABELS[stage] for stage in ("stage2", "stage3")}   # self-consistency votes on these


class Wrapper:
    """A backend around ``inner``: its name, whether it is served, its hardware, counters and progress are
    ``inner``'s, and it describes itself as ``inner`` does."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def served(self) -> bool:
        return self.inner.served

    @property
    def hardware(self) -> Any:
        return self.inner.hardware

    @property
    def stats(self) -> dict[str, Any]:
        return self.inner.stats

    @property
    def progress(self) -> Callable[[int], None] | None:
        return self.inner.progress

    @progress.setter
    def progress(self, fn: Callable[[int], None] | None) -> None:
        self.inner.progress = fn

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


class ReadThrough(Wrapper):
    """A :class:`Wrapper` whose every other attribute is read from ``inner`` (its heads, priors, adapters)."""

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner" or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.inner, attr)


class CachedBackend:
    """Any deterministic backend with its answers cached on disk, per request. ``inner`` may be a
    factory: the model is then loaded only when the first request misses the cache."""

    def __init__(self, inner: Backend | Callable[[], Backend], cache: CallCache, identity: Mapping[str, Any],
                 name: str | None = None) -> None:
        self._inner = inner if hasattr(inner, "run") else None
        self._factory = None if self._inner is not None else inner
        self.cache = cache
        self.identity = dict(identity)
        self.name = name or getattr(inner, "name", type(inner).__name__)
        self.progress: Callable[[int], None] | None = None
        self.stats = {"requests": 0, "hits": 0, "calls": 0, "failures": 0, "retries": 0, "call_s": 0.0}

    @property
    def inner(self) -> Backend:
        if self._inner is None:
            self._inner = self._factory()  # type: ignore[misc]
        return self._inner

    @property
    def served(self) -> bool:
        return self._inner is not None and self._inner.served

    @property
    def hardware(self) -> Any:
        """The inner model's, once it is loaded (an all-cached run loads none)."""
        return self._inner.hardware if self._inner is not None else None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "cache": str(self.cache.root), "identity": self.identity}

    def key(self, req: Request) -> str:
        return call_key({**self.identity, "messages": list(req.messages), "labels": list(req.labels),
                         "max_new_tokens": req.max_new_tokens,
                         "stop_on_repeat": getattr(req, "stop_on_repeat", False)})

    def run(self, requests: list[Request]) -> list[Response]:
        keys = [self.key(r) for r in requests]
        out: list[Response | None] = [None] * len(requests)
        missing: list[int] = []
        for i, k in enumerate(keys):
            self.stats["requests"] += 1
            entry = self.cache.get(k)
            if entry is None:
                missing.append(i)
                continue
            out[i] = Response(entry["text"], entry.get("label"), entry.get("probs"), entry.get("prompt_tokens", 0),
                              entry.get("completion_tokens", 0), {"cache_key": k, "cached": True,
                                                                   "latency_s": entry.get("latency_s")})
        self.stats["hits"] += len(requests) - len(missing)
        if self.progress is not None and len(requests) > len(missing):
            self.progress(len(requests) - len(missing))
        if missing:
            start = time.perf_counter()
            answers = self.inner.run([requests[i] for i in missing])
            per_call = (time.perf_counter() - start) / len(missing)
            for i, resp in zip(missing, answers):
                entry = {"text": resp.text, "label": resp.label, "probs": resp.probs,
                         "prompt_tokens": resp.prompt_tokens, "completion_tokens": resp.completion_tokens,
                         "stage": requests[i].stage, "messages_digest": messages_digest(requests[i].messages),
                         "latency_s": round(per_call, 4), **self.identity}
                self.cache.put(keys[i], entry)
                resp.meta.update(cache_key=keys[i], cached=False, latency_s=entry["latency_s"])
                out[i] = resp
            self.stats["calls"] += len(missing)
            self.stats["call_s"] += per_call * len(missing)
            if self.progress is not None:
                self.progress(len(missing))
        return out  # type: ignore[return-value]


class VotingBackend(Wrapper):
    """Self-consistency for stages 2 and 3: ``k`` answers per request, the first the configured
    (greedy) one; the returned answer is the greedy one with ``probs`` = the share of the ``k``
    answers that parse to each label (the engine keeps it as the claim's probabilities)."""

    def __init__(self, inner: OpenAIBackend, k: int, temperature: float) -> None:
        if not hasattr(inner, "run_samples"):
            raise ServerError(f"distill.self_consistency_k > 1 needs a sampling teacher (openai); "
                               f"{getattr(inner, 'name', inner)!r} cannot draw samples")
        super().__init__(inner)
        self.k, self.temperature = k, temperature

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "self_consistency": {"k": self.k, "temperature": self.temperature}}

    def run(self, requests: list[Request]) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        voted = [i for i, r in enumerate(requests) if r.stage in VOTED_STAGES]
        plain = [i for i in range(len(requests)) if i not in set(voted)]
        if plain:
            for i, resp in zip(plain, self.inner.run([requests[i] for i in plain])):
                out[i] = resp
        if voted:
            groups = self.inner.run_samples([requests[i] for i in voted], self.k, self.temperature)
            for i, group in zip(voted, groups):
                labels = VOTED_STAGES[requests[i].stage]
                votes = [parse_label(s.text, labels).label for s in group]
                counts = Counter(v for v in votes if v is not None)
                greedy = group[0]
                greedy.probs = {lab: counts.get(lab, 0) / self.k for lab in labels}
                greedy.meta["votes"] = votes
                out[i] = greedy
        return out  # type: ignore[return-value]
