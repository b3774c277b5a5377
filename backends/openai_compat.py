"""A model behind any OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, hosted): the teacher's chat
completions here, the student's and base model's rendered prompts in :mod:`.server`.

``run`` sends a batch concurrently (at most ``concurrency`` requests in flight per replica) and returns the
answers in request order. ``base_url`` may list several replicas of one deployment: each request goes to
the live replica with the fewest requests in flight; a replica that fails (connection refused, timeout,
429, 5xx) is set aside for a backoff and its request goes to another one; a replica that answers again
after its backoff is used again. Only when every replica has failed ``max_retries + 1`` times in a row
does the run stop. Every completed call is written to the :class:`CallCache` the moment it
arrives, so an interrupted run loses at most the calls in flight. 429, 5xx, timeouts and connection
errors are retried with exponential backoff and jitter; when the retries run out the batch stops
with :class:`ServerUnavailable` and a rerun resumes from the cache. Other 4xx answers (a prompt
too long, ...) fail that request only: an empty answer the engine records as a parse failure.
401/403/404 stop the run with :class:`ServerError` (wrong key, URL or model).

The API key is read from the environment variable named by ``api_key_env`` at each call and is
never stored on the object, logged, or written. ``<think>`` blocks (and a ``reasoning_content``
field) are stripped from the answer and kept in ``Response.meta["think"]`` and the cache.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..pipeline.labels import answer
from ..pipeline.parsing import strip_think
from ..pipeline.protocol import Request, Response
from .cache import CallCache, call_key, messages_digest
from .replicas import Aborted, Exhausted, Replicas, redact_url  # noqa: F401 (redact_url re-exported)

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429})


class ServerError(RuntimeError):
    """A server (teacher, student or base) cannot be used as configured: absent, key refused, unknown model."""


class ServerUnavailable(ServerError):
    """Retries ran out mid-run; completed calls are cached and a rerun resumes."""


class Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers.get("retry-after")))
    except (TypeError, ValueError):
        return None


def _run_coroutine(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside an event loop (a notebook): run ours on a worker thread.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class ConnectionSettings:
    """How a served backend calls its servers: the API key, the requests in flight, and the retries of a failed
    request (exponential backoff with jitter, at least the server's Retry-After)."""

    api_key_env: str = "OPENAI_API_KEY"   # environment variable holding the server's API key
    concurrency: int = 8           # requests in flight per replica
    timeout_s: float = 120.0       # seconds before a request is retried
    max_retries: int = 5           # consecutive failures of every replica before a run stops
    retry_backoff_s: float = 1.0   # first wait before a retry; doubles up to retry_backoff_max_s
    retry_backoff_max_s: float = 30.0   # longest wait between retries


@dataclass
class OpenAISettings(ConnectionSettings):
    """:class:`OpenAIBackend`'s settings: the connection's and what every chat completion request carries."""

    temperature: float = 0.0       # sampling temperature (0: greedy)
    seed: int = 0                  # sampling seed sent to the server (self-consistency uses seed + i)
    extra_body: dict[str, Any] = field(default_factory=dict)       # more request fields (e.g. top_p)
    # sent as chat_template_kwargs: vLLM and SGLang pass them to the model's chat template; servers that do not know
    # the field ignore it (llama.cpp) or need it emptied (hosted APIs: {})
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)


class ServedBackend:
    """What the served backends share: replicas, retries, the call cache and the checks of the server (the module
    docstring); :class:`OpenAIBackend` and :class:`.server.ServerBackend` say what is sent and how it is read."""

    name = "served"
    endpoint = "chat/completions"
    served = True
    hardware = None

    def __init__(self, model: str, base_url: str | Sequence[str], settings: ConnectionSettings, *,
                 cache: CallCache | None = None, role: str = "teacher") -> None:
        self.role = role
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        where = "teacher.base_url" if role == "teacher" else f"{role} servers"
        if not urls:
            raise ServerError(f"{where}: no server URL given")
        for url in urls:
            if not url or not str(url).startswith(("http://", "https://")):
                raise ServerError(f"{where} must be http(s) URLs such as http://127.0.0.1:8000/v1, got {url!r}")
        if not model:
            raise ServerError(f"{role}: the model name the server serves is required")
        if settings.concurrency < 1:
            raise ServerError(f"{role} concurrency must be >= 1, got {settings.concurrency}")
        self.model = model
        self.base_urls = [str(u).rstrip("/") for u in urls]
        self.base_url = self.base_urls[0]
        self.settings = settings
        self.api_key_env, self.concurrency = settings.api_key_env, settings.concurrency
        self.timeout_s, self.max_retries = settings.timeout_s, settings.max_retries
        self.backoff_s, self.backoff_max_s = settings.retry_backoff_s, settings.retry_backoff_max_s
        self.cache = cache
        self.progress: Callable[[int], None] | None = None   # told n as requests finish
        self.stats = {"requests": 0, "hits": 0, "calls": 0, "failures": 0, "retries": 0,
                      "prompt_tokens": 0, "completion_tokens": 0, "call_s": 0.0}
        self.replicas = Replicas(self.base_urls, self.max_retries, self._delay, role)
        self._checked = False

    def __repr__(self) -> str:
        urls = ", ".join(redact_url(u) for u in self.base_urls)
        return f"{type(self).__name__}(model={self.model!r}, base_url={urls!r})"

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        """Cache key of a request body (each backend's: its API, the body, not the server's URL)."""
        raise NotImplementedError

    def parse(self, r: Any) -> dict[str, Any]:
        """The cache entry of a 2xx answer."""
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def send(self, jobs: Sequence[tuple[Request, dict[str, Any]]], in_flight: int | None = None) -> list[Response]:
        """Answer ``(request, body)`` jobs from the cache or the server; identical bodies are sent once; at most
        ``in_flight`` at a time over all replicas (default: ``concurrency`` per replica)."""
        out: list[Response | None] = [None] * len(jobs)
        todo: dict[str, list[int]] = {}
        hits = 0
        for i, (_req, body) in enumerate(jobs):
            self.stats["requests"] += 1
            k = self.key(body)
            if k in todo:
                todo[k].append(i)
                continue
            entry = self.cache.get(k) if self.cache is not None else None
            if entry is not None:
                out[i] = self._response(k, entry, cached=True)
                hits += 1
            else:
                todo[k] = [i]
        self.stats["hits"] += hits
        if hits and self.progress is not None:
            self.progress(hits)
        if todo:
            self.check_server()
            keys = list(todo)
            results = _run_coroutine(self._gather([(k, *jobs[todo[k][0]]) for k in keys], todo, in_flight))
            first_error: BaseException | None = None
            for k, res in zip(keys, results):
                if isinstance(res, BaseException):
                    if first_error is None or isinstance(first_error, Aborted):
                        first_error = res
                    continue
                for i in todo[k]:
                    out[i] = self._response(k, res, cached=False)
            if first_error is not None:
                raise first_error
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ server

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "servers": [redact_url(u) for u in self.base_urls], "model": self.model,
                "replica_events": self.replicas.events}

    def check_server(self) -> None:
        """Fail fast with a clear error when no replica answers or one refuses the key (once). A replica
        that does not answer while another does is set aside (and tried again after its backoff)."""
        if self._checked:
            return
        import httpx

        unreachable = []
        for rep in self.replicas.replicas:
            url = f"{rep.url}/models"
            try:
                r = httpx.get(url, headers=self._headers(), timeout=min(self.timeout_s, 10.0))
            except httpx.HTTPError as e:
                unreachable.append((rep, f"{type(e).__name__}: {e}"))
                continue
            if r.status_code in (401, 403):
                raise ServerError(self._key_message(r.status_code, rep.url))
            if r.status_code == 200:
                try:
                    served = [m.get("id") for m in r.json().get("data", [])]
                except (ValueError, AttributeError):
                    served = []
                self.check_models(rep.url, served)
        if len(unreachable) == len(self.replicas.replicas):
            rep, err = unreachable[0]
            where = "teacher.base_url in the recipe" if self.role == "teacher" else f"the {self.role} server URLs"
            raise ServerError(
                f"cannot reach the {self.role} server at {redact_url(rep.url)} ({err}); start the server or fix "
                f"{where}" + (f" ({len(unreachable)} replicas, none answered)" if len(unreachable) > 1 else ""))
        for rep, err in unreachable:
            log.warning("%s server %s does not answer (%s); using the other replicas", self.role,
                        redact_url(rep.url), err)
            self.replicas.set_aside(rep, RuntimeError(err))
        self._checked = True

    def check_models(self, url: str, served: list[str]) -> None:
        """Warn when the server lists models but not ours (some servers alias every name)."""
        if served and self.model not in served:
            log.warning("%s server %s lists models %s, not %r; sending requests anyway", self.role,
                        redact_url(url), served, self.model)

    def _key_message(self, status: int, url: str | None = None) -> str:
        state = "is set" if os.environ.get(self.api_key_env) else "is not set"
        return (
            f"{self.role} server {redact_url(url or self.base_url)} answered HTTP {status}: the API key was refused "
            f"(read from the environment variable {self.api_key_env}, which {state})"
        )

    async def _gather(self, jobs: list[tuple[str, Request, dict[str, Any]]],
                      todo: dict[str, list[int]], in_flight: int | None = None) -> list[Any]:
        import httpx

        n = in_flight or self.concurrency * len(self.base_urls)
        sem = asyncio.Semaphore(n)
        abort = asyncio.Event()
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits) as client:
            tasks = [self._call(client, sem, abort, k, req, body, len(todo[k])) for k, req, body in jobs]
            return await asyncio.gather(*tasks, return_exceptions=True)

    async def _call(self, client: Any, sem: asyncio.Semaphore, abort: asyncio.Event, key: str,
                    req: Request, body: dict[str, Any], n_waiting: int) -> dict[str, Any]:
        async with sem:
            start = time.perf_counter()
            attempts = 0
            while True:
                try:
                    rep, episode = await self.replicas.acquire(abort)
                except Exhausted:
                    abort.set()
                    self.stats["failures"] += 1
                    raise ServerUnavailable(
                        f"{self.role} server{'s' if len(self.base_urls) > 1 else ''} failed "
                        f"{self.max_retries + 1} time(s) in a row ({self.replicas.describe()}); "
                        + ("completed calls are cached: rerun the same command to resume" if self.cache is not None
                           else "rerun the same command to resume (score and eval keep what had finished)")) \
                        from None
                attempts += 1
                try:
                    entry = await self._post(client, rep.url, body)
                except Retryable as e:
                    if self.replicas.failed(rep, episode, e) and rep.fails <= self.max_retries:
                        self.stats["retries"] += 1
                        log.warning("%s call failed on %s (%s); retry %d/%d", self.role, redact_url(rep.url), e,
                                    rep.fails, self.max_retries)
                    continue
                except ServerError:
                    rep.in_flight -= 1
                    abort.set()
                    self.stats["failures"] += 1
                    raise
                self.replicas.succeeded(rep)
                break
        elapsed = time.perf_counter() - start
        entry.update(
            model=body.get("model", self.model),
            stage=req.stage,
            messages_digest=messages_digest(req.messages),
            target=req.messages[-1]["content"] if req.messages else "",
            params={k: v for k, v in body.items() if k not in ("messages", "prompt")},
            latency_s=round(elapsed, 4),
            attempts=attempts,
            created=round(time.time(), 3),
        )
        if len(self.base_urls) > 1:
            entry["replica"] = redact_url(rep.url)
        if "error" in entry:
            self.stats["failures"] += 1   # per-request failure: not cached, so a rerun tries again
        else:
            self.stats["calls"] += 1
            self.stats["call_s"] += elapsed
            self.stats["prompt_tokens"] += entry.get("prompt_tokens", 0)
            self.stats["completion_tokens"] += entry.get("completion_tokens", 0)
            if self.cache is not None:
                self.cache.put(key, entry)
        if self.progress is not None:
            self.progress(n_waiting)
        return entry

    def _delay(self, fails: int, exc: BaseException) -> float:
        """Backoff before a failed replica is tried again: exponential with jitter, at least Retry-After."""
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (fails - 1))
        delay *= 0.5 + random.random() / 2   # jitter: concurrent retries do not hit the server together
        if isinstance(exc, Retryable) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, self.backoff_max_s))
        return delay

    async def _post(self, client: Any, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        url = f"{base_url}/{self.endpoint}"
        try:
            r = await client.post(url, json=body, headers=self._headers())
        except httpx.TimeoutException as e:
            raise Retryable(f"timeout after {self.timeout_s:g}s ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise Retryable(f"connection error: {type(e).__name__}: {e}") from None
        status = r.status_code
        if status in RETRY_STATUS or status >= 500:
            raise Retryable(f"HTTP {status}: {r.text[:200]}", _retry_after(r.headers))
        if status in (401, 403):
            raise ServerError(self._key_message(status))
        if status == 404:
            raise ServerError(f"{redact_url(url)} answered HTTP 404 (no {self.endpoint} endpoint, or no "
                               f"model {body.get('model', self.model)!r}): {r.text[:200]}")
        if status >= 400:
            return {"error": f"HTTP {status}: {r.text[:300]}"}
        return self.parse(r)

    @staticmethod
    def _response(key: str, entry: dict[str, Any], cached: bool) -> Response:
        meta = {
            "cache_key": key, "cached": cached,
            **{k: entry.get(k) for k in ("raw", "think", "finish_reason", "latency_s", "attempts", "error")
               if entry.get(k) not in (None, "")},
        }
        return Response(text=entry.get("text", ""), prompt_tokens=entry.get("prompt_tokens", 0),
                        completion_tokens=entry.get("completion_tokens", 0), meta=meta)


class OpenAIBackend(ServedBackend):
    """:class:`~vista_distill.pipeline.protocol.Backend` over ``POST {base_url}/chat/completions``."""

    name = "openai"

    def __init__(self, model: str, base_url: str | Sequence[str], settings: OpenAISettings | None = None, *,
                 cache: CallCache | None = None, role: str = "teacher") -> None:
        settings = settings if settings is not None else OpenAISettings()
        super().__init__(model, base_url, settings, cache=cache, role=role)
        self.temperature, self.seed = settings.temperature, settings.seed
        self.extra_body = dict(settings.extra_body or {})
        self.chat_template_kwargs = dict(settings.chat_template_kwargs or {})

    def body(self, req: Request, sample: int = 0, temperature: float | None = None) -> dict[str, Any]:
        """The JSON body of a request; sample ``i`` > 0 uses seed + i (self-consistency)."""
        body = {
            **self.extra_body,
            "model": self.model,
            "messages": [dict(m) for m in req.messages],
            "max_tokens": req.max_new_tokens,
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed + sample,
        }
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = {**body.get("chat_template_kwargs", {}), **self.chat_template_kwargs}
        return body

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        """Cache key: model, messages and every sampling parameter (not the server's URL)."""
        return call_key({"api": "chat.completions", **body})

    def run(self, requests: list[Request]) -> list[Response]:
        """Every request generated (a label request's answer is parsed by the engine): pipeline/labels.py ``answer``
        with the one verb this backend has."""
        return answer(self, requests)

    def generate(self, requests: list[Request]) -> list[Response]:
        return self.send([(r, self.body(r)) for r in requests])

    def run_samples(self, requests: Sequence[Request], k: int, temperature: float) -> list[list[Response]]:
        """``k`` answers per request: the configured call (shared with :meth:`run`) and ``k - 1``
        samples at ``temperature`` with seeds seed+1 ... seed+k-1."""
        jobs = []
        for r in requests:
            jobs.append((r, self.body(r)))
            jobs += [(r, self.body(r, sample=i, temperature=temperature)) for i in range(1, k)]
        flat = self.send(jobs)
        return [flat[j * k:(j + 1) * k] for j in range(len(requests))]

    def parse(self, r: Any) -> dict[str, Any]:
        """The cache entry of a 2xx answer (chat completions)."""
        try:
            data = r.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
            raw = message.get("content") or ""
            reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise Retryable(f"malformed response body {r.text[:200]!r}") from None
        answer, think = strip_think(raw)
        return {
            "raw": raw,
            "text": answer,
            "think": "\n".join(t for t in (str(reasoning).strip(), think) if t),
            "finish_reason": choice.get("finish_reason"),
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
        }
