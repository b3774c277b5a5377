"""The teacher named by a recipe's ``teacher`` section, wrapped for caching, self-consistency and
provenance.

* ``openai``: :class:`OpenAIBackend`, caching each call as it completes;
* ``transformers``: the local :class:`~vista_distill.backends.transformers.TransformersBackend` behind
  :class:`CachedBackend` (cached per batch);
* ``labels``: human claim labels (:class:`LabelsBackend`), with ``teacher.fallback`` (a model on
  ``base_url`` when one is set, else a local model) for the requests the labels do not cover.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Recipe, TeacherConfig
from ..data.schema import STAGE2_LABELS, STAGE3_LABELS, Conversation
from ..pipeline.parsing import parse_label
from .base import Backend, Request, Response
from .cache import CallCache, call_key, messages_digest
from .openai_compat import OpenAIBackend, TeacherError, redact_url

VOTED_STAGES = {"stage2": STAGE2_LABELS, "stage3": STAGE3_LABELS}


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

    def key(self, req: Request) -> str:
        return call_key({**self.identity, "messages": list(req.messages), "labels": list(req.labels),
                         "max_new_tokens": req.max_new_tokens,
                         "stop_on_repeat": getattr(req, "stop_on_repeat", False)})

    def run(self, requests: list[Request]) -> list[Response]:
        import time

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


class VotingBackend:
    """Self-consistency for stages 2 and 3: ``k`` answers per request, the first the configured
    (greedy) one; the returned answer is the greedy one with ``probs`` = the share of the ``k``
    answers that parse to each label (the engine keeps it as the claim's probabilities)."""

    def __init__(self, inner: OpenAIBackend, k: int, temperature: float) -> None:
        if not hasattr(inner, "run_samples"):
            raise TeacherError(f"distill.self_consistency_k > 1 needs a sampling teacher (openai); "
                               f"{getattr(inner, 'name', inner)!r} cannot draw samples")
        self.inner, self.k, self.temperature = inner, k, temperature
        self.name = inner.name

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


class Recorder:
    """Remembers the response to every request (by stage and messages) for provenance records."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.responses: dict[tuple[str, str], Response] = {}
        self.requests = 0

    def run(self, requests: list[Request]) -> list[Response]:
        self.requests += len(requests)
        answers = self.inner.run(requests)
        for r, a in zip(requests, answers):
            self.responses[r.stage, messages_digest(r.messages)] = a
        return answers

    def lookup(self, stage: str, messages: Sequence[dict[str, str]]) -> Response | None:
        return self.responses.get((stage, messages_digest(messages)))


@dataclass
class Teacher:
    """The backend chain to hand to the engine, the innermost backend (stats, progress) and a name."""

    backend: Recorder
    core: Any
    name: str
    description: dict[str, Any]


def _openai(cfg: TeacherConfig, model: str | None, cache: CallCache) -> OpenAIBackend:
    if not cfg.base_url:
        raise TeacherError("teacher.base_url is required for an OpenAI-compatible teacher "
                           "(e.g. http://127.0.0.1:8000/v1)")
    if not model:
        raise TeacherError("teacher.model is required for an OpenAI-compatible teacher (the served model name)")
    return OpenAIBackend(model, cfg.base_url, api_key_env=cfg.api_key_env, concurrency=cfg.concurrency,
                         timeout_s=cfg.timeout_s, max_retries=cfg.max_retries, temperature=cfg.temperature,
                         seed=cfg.seed, extra_body=cfg.extra_body, chat_template_kwargs=cfg.chat_template_kwargs,
                         cache=cache, backoff_s=cfg.retry_backoff_s,
                         backoff_max_s=cfg.retry_backoff_max_s)


def local_identity(model: str | None, dtype: str, chat_template_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What keys a local teacher's cached answers: the weights and chat template it renders with (digests
    of the files on disk, see :mod:`.model_fingerprint`; a hub id not downloaded yet: its name and
    revision), the template variables, the resolved dtype and greedy decoding. A local folder is keyed by
    its content, not its path, so a moved or copied model keeps its cache."""
    from .fingerprint import model_fingerprint
    from .models import EMBEDDED_NAME, resolve_model

    path = resolve_model(model)   # the embedded model: its converted copy in the cache (converted once)
    if model in (None, "", "embedded", EMBEDDED_NAME):
        name = "embedded:SmolLM2-135M"
    else:
        name = "local folder" if Path(model).expanduser().is_dir() else model
    return {"backend": "transformers", "model": name, **model_fingerprint(path), "dtype": dtype,
            "chat_template_kwargs": dict(chat_template_kwargs), "decoding": "greedy"}


def _local(cfg: TeacherConfig, model: str | None, cache: CallCache) -> CachedBackend:
    from ..hardware import resolve_dtype
    from .transformers import TransformersBackend

    # The resolved dtype (not "auto") keys the cache: answers computed in bf16 and in fp32 differ.
    dtype = resolve_dtype(cfg.dtype, where="teacher.dtype").dtype
    return CachedBackend(lambda: TransformersBackend(model, dtype=dtype, batch_size=cfg.batch_size,
                                                     threads=cfg.threads,
                                                     chat_template_kwargs=cfg.chat_template_kwargs), cache,
                         local_identity(model, dtype, cfg.chat_template_kwargs), name="transformers")


def build_teacher(recipe: Recipe, conversations: Iterable[Conversation], cache: CallCache) -> Teacher:
    """The teacher backend of ``recipe`` (see the module docstring)."""
    cfg = recipe.teacher
    desc: dict[str, Any] = {"backend": cfg.backend, "model": cfg.model, "prompt_style": cfg.prompt_style,
                            "temperature": cfg.temperature, "seed": cfg.seed}
    if cfg.backend == "openai":
        core: Any = _openai(cfg, cfg.model, cache)
        name = f"openai:{cfg.model}"
        desc["base_url"] = redact_url(core.base_url)
        chain: Any = core
    elif cfg.backend == "transformers":
        core = chain = _local(cfg, cfg.model, cache)
        name = f"transformers:{cfg.model or 'SmolLM2-135M-Instruct'}"
        desc["dtype"] = core.identity["dtype"]
    elif cfg.backend == "labels":
        from .labels import LabelsBackend

        fallback = None
        name = "labels"
        if cfg.fallback:
            fallback = _openai(cfg, cfg.fallback, cache) if cfg.base_url else _local(cfg, cfg.fallback, cache)
            name = f"labels+{'openai' if cfg.base_url else 'transformers'}:{cfg.fallback}"
            desc["fallback"] = cfg.fallback
        chain = LabelsBackend(conversations, fallback=fallback)
        core = fallback if fallback is not None else chain
    else:
        raise TeacherError(f"teacher.backend must be openai, transformers or labels, got {cfg.backend!r}")
    k = recipe.distill.self_consistency_k
    if k > 1:
        if not isinstance(chain, OpenAIBackend):
            raise TeacherError(f"distill.self_consistency_k = {k} needs teacher.backend openai (samples from a "
                               f"server); {cfg.backend!r} is deterministic")
        chain = VotingBackend(chain, k, recipe.distill.self_consistency_temperature)
        desc["self_consistency"] = {"k": k, "temperature": recipe.distill.self_consistency_temperature}
    desc["name"] = name
    return Teacher(Recorder(chain), core, name, desc)
