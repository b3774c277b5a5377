"""The student, the base model or a baseline on OpenAI-compatible servers (vLLM, SGLang, llama.cpp, TGI).

Prompts are rendered here, through the model's own chat template (:func:`~vista_distill.pipeline.render.render`,
the renderer the in-process backend and training use), and sent as text to ``/v1/completions``. Each stage's
requests name that stage's served model: a LoRA adapter on vLLM (``--lora-modules stage1=DIR ...``) or
SGLang (``--lora-paths``), a model alias on llama.cpp (one entry per adapter in its config file); stages
without an adapter use the base model's name.

Stages 2-3 keep label scoring. Each label's log-likelihood comes from the server's logprobs, by one of:

* ``echo``: the prompt followed by the label, sent with ``echo`` and ``logprobs``; the label tokens' prompt
  logprobs are summed. Exact (vLLM, SGLang, hosted completions). llama-cpp-python supports it too but sorts
  the whole vocabulary in Python for every echoed token (seconds per request).
* ``top_logprobs``: one request per label token (prompt plus the label's first ``j`` tokens, one new token,
  the ``top_logprobs`` most likely): the label token's logprob read from that list. Exact whenever every
  label token is among them (the answer records the labels where one was not: then the list's smallest
  logprob stands in, an upper bound). Servers that cache prompt prefixes (all of the above) compute only
  the new tokens.
* ``generate``: a short greedy answer matched to a label (no probabilities).

``auto`` tries them in that order on the first label request and keeps the first the server supports.
Which method ran is recorded with every answer (``meta["label_method"]``).

A stage whose adapter folder carries an evidence head (``evidence_head.json``, :mod:`.evidence_head`) is scored with
it where the server echoes prompt log-probabilities (``echo``): the claim's mean log-probability is read from the
echoed prompt, once more from an echo of the same prompt with an empty reference, and the head weighs that PMI with
the label margin and the claim's word overlap, as in process. With ``top_logprobs`` or ``generate`` the head cannot be
applied, and each answer says so (``meta["evidence"]["error"]``). The label layer (pipeline/labels.py) weighs the
numbers, as for every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..data.vocabulary import ALL_STAGES
from ..pipeline.labels import answer
from ..pipeline.protocol import LabelScores, Request, Response
from ..pipeline.render import THINKING_OFF, render
from .cache import CallCache, call_key
from .evidence_head import EvidenceHead
from .label_prior import LabelPrior
from .list_generation import RepeatedLineStop, list_stop_reason
from .openai_compat import ConnectionSettings, Retryable, ServedBackend, ServerError, redact_url

log = logging.getLogger(__name__)

LABEL_METHODS = ("auto", "echo", "top_logprobs", "generate")


def truncate_repeats(text: str, backend: Any) -> str:
    """``text`` cut where the in-process backend's stop rule (:class:`~.list_generation.RepeatedLineStop`: a
    completed line repeating an earlier one, a line saying one sentence three times) would have ended it, replayed
    over the text's tokens (``backend.tokenizer``; servers cannot be told to stop there)."""
    ids = backend.tokenizer(text, add_special_tokens=False)["input_ids"]
    stop = RepeatedLineStop(backend, 0)
    for k in range(1, len(ids) + 1):
        if stop.row_done(ids[:k]):
            return backend.tokenizer.decode(ids[:k], skip_special_tokens=True)
    return text


@dataclass
class ServingSettings(ConnectionSettings):
    """How the student and the base model are reached when ``student.servers`` lists servers: what they are served
    as, how labels are scored, and the connection (ConnectionSettings in backends/openai_compat.py, the keys from
    api_key_env on)."""

    base_model: str = "base"       # the base model's served name (vLLM --served-model-name; a llama.cpp alias)
    adapters: dict[str, str] = field(default_factory=lambda: {"stage1": "stage1", "stage2": "stage2",
                                                              "stage3": "stage3"})  # stage -> served adapter name
    label_scoring: Literal["auto", "echo", "top_logprobs", "generate"] = "auto"   # backends/server.py
    top_logprobs: int = 20         # logprobs asked per token by top_logprobs (vLLM's --max-logprobs caps it)
    concurrency: int = 4           # requests in flight per replica
    echo_concurrency: int = 1      # echo requests in flight, all replicas (vLLM LoRA + prompt logprobs: docs/serve.md)
    # cache answers under the run's output folder (calls-<role>/), keyed by served name and prompt: a rerun
    # resumes; clear it when the served adapters change under the same names
    cache: bool = False


@dataclass(frozen=True)
class ServedAdapters:
    """A served student's stage adapters: each stage's served name, and the evidence head and label prior of each
    stage that has one beside its adapter (``folder``: the adapters' local folder, where named calibrations are)."""

    names: Mapping[str, str] = field(default_factory=dict)
    heads: Mapping[str, EvidenceHead] = field(default_factory=dict)
    priors: Mapping[str, LabelPrior] = field(default_factory=dict)
    folder: Path | None = None


class ServerBackend(ServedBackend):
    """:class:`~vista_distill.pipeline.protocol.Backend` over ``POST {url}/completions`` on one or more replicas."""

    name = "server"
    endpoint = "completions"

    def __init__(self, tokenizer: Any, base_url: str | Sequence[str], settings: ServingSettings | None = None,
                 adapters: ServedAdapters | None = None, *, chat_template_kwargs: Mapping[str, Any] | None = None,
                 role: str = "student", cache: CallCache | None = None) -> None:
        """``tokenizer``: the model's tokenizer (renders prompts, splits labels into tokens); ``settings``: the
        base model's served name, the label scoring and the connection; ``adapters``: the served stage adapters
        (none: every stage asks the base model; an evidence head is applied where the label method is echo)."""
        settings = settings if settings is not None else ServingSettings()
        adapters = adapters if adapters is not None else ServedAdapters()
        if settings.label_scoring not in LABEL_METHODS:
            raise ServerError(f"{role}: label_scoring must be one of {LABEL_METHODS}, got {settings.label_scoring!r}")
        bad = sorted(set(adapters.names) - set(ALL_STAGES))
        if bad:
            raise ServerError(f"{role}: server model names for unknown stages {bad}; stages are {ALL_STAGES}")
        super().__init__(settings.base_model, base_url, settings, role=role, cache=cache)
        self.tokenizer = tokenizer
        self.stage_models = dict(adapters.names)
        self.label_scoring = settings.label_scoring
        self.top_logprobs = settings.top_logprobs
        self.template_kwargs = dict(THINKING_OFF if chat_template_kwargs is None else chat_template_kwargs)
        self.method: str | None = None if self.label_scoring == "auto" else self.label_scoring
        self.name = f"server:{self.model}"
        self.stats["label_methods"] = {}
        self.echo_concurrency = settings.echo_concurrency
        self.heads = dict(adapters.heads)
        self.priors = dict(adapters.priors)   # label priors kept beside the stage adapters (backends/label_prior.py)
        self.adapter_folder = adapters.folder   # the served adapters' local folder (named calibrations are there)

    def _echoed(self, jobs: list[tuple[Request, dict[str, Any]]]) -> list[Response]:
        """Echo (prompt-logprob) jobs, at most ``echo_concurrency`` in flight over all replicas."""
        return self.send(jobs, in_flight=self.echo_concurrency)

    def served_name(self, stage: str) -> str:
        return self.stage_models.get(stage, self.model)

    def describe(self) -> dict[str, Any]:
        return {"backend": "server", "servers": [redact_url(u) for u in self.base_urls], "model": self.model,
                "stage_models": self.stage_models, "label_scoring": self.label_scoring,
                "label_method": self.method, "replica_events": self.replicas.events,
                "evidence_heads": sorted(self.heads), "label_priors": sorted(self.priors)}

    # ------------------------------------------------------------------ requests

    def prompt(self, req: Request) -> str:
        return render(self.tokenizer, list(req.messages), template_kwargs=self.template_kwargs)

    def completion(self, req: Request, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
        return {"model": self.served_name(req.stage), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                "seed": 0, **extra}

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        return call_key({"api": "completions", **body})

    def check_models(self, url: str, served: list[str]) -> None:
        # llama.cpp answers an unknown model name with its default model: a missing adapter would go unseen.
        wanted = {self.model, *self.stage_models.values()}
        missing = sorted(w for w in wanted if served and w not in served)
        if missing:
            raise ServerError(f"{self.role} server {redact_url(url)} does not serve {missing} (it serves {served}); "
                               "serve the adapters under these names (vista-distill serve-config) or fix the "
                               "recipe's student.serving names")

    def parse(self, r: Any) -> dict[str, Any]:
        try:
            data = r.json()
            choice = data["choices"][0]
            text = choice.get("text") or ""
            usage = data.get("usage") or {}
            lp = choice.get("logprobs") or None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise Retryable(f"malformed response body {r.text[:200]!r}") from None
        entry: dict[str, Any] = {"raw": text, "text": text, "finish_reason": choice.get("finish_reason"),
                                 "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                                 "completion_tokens": int(usage.get("completion_tokens") or 0)}
        if lp:
            top = lp.get("top_logprobs") or []
            entry["logprobs"] = {"tokens": lp.get("tokens"), "token_logprobs": lp.get("token_logprobs"),
                                 "text_offset": lp.get("text_offset"),
                                 # only the first generated position's list is read (top_logprobs method)
                                 "top": None if not top else _top_at(lp, top)}
        return entry

    @staticmethod
    def _response(key: str, entry: dict[str, Any], cached: bool) -> Response:
        resp = ServedBackend._response(key, entry, cached)
        if entry.get("logprobs"):
            resp.meta["logprobs_raw"] = entry["logprobs"]
        return resp

    # ------------------------------------------------------------------ Backend protocol

    def run(self, requests: list[Request]) -> list[Response]:
        """The pipeline's verb: generation and label answers (pipeline/labels.py ``answer``, from the two below)."""
        return answer(self, requests)

    def generate(self, requests: list[Request]) -> list[Response]:
        """Free generation on the server; with ``stop_on_repeat``, the text cut where the in-process stop rule
        would have stopped it."""
        answers = self.send([(r, self.completion(r, self.prompt(r), r.max_new_tokens)) for r in requests])
        out = []
        for r, a in zip(requests, answers):
            text = a.text
            if r.stop_on_repeat:
                text = truncate_repeats(text, self)
                # the finish reason and raw text the in-process backend records where its stop rule fires
                a.meta["finish_reason"] = list_stop_reason(text) or a.meta.get("finish_reason")
                if text != a.text:
                    a.meta["raw"], a.meta["server_chars"] = text.strip(), len(a.text)
            a.meta.pop("logprobs_raw", None)
            out.append(Response(text=text.strip(), prompt_tokens=a.prompt_tokens,
                                completion_tokens=a.completion_tokens, meta=a.meta))
        return out

    # ------------------------------------------------------------------ label scoring

    def label_logprobs(self, requests: list[Request], claims: list[bool]) -> list[LabelScores]:
        """Each label's log-probability by the server's method (echo, top_logprobs; generate: matched, none), and
        where ``claims[i]``, the claim's echoed log-probabilities in the prompt and its twin (echo only)."""
        prompts = [self.prompt(r) for r in requests]
        if self.method is None:
            self.method = self._probe(requests[0], prompts[0])
            log.info("%s: label scoring by %s", self.name, self.method)
        method = self.method
        if method == "echo":
            res = self._echo(requests, prompts, claims)
        elif method == "top_logprobs":
            res = self._top_logprobs(requests, prompts)
        else:
            res = self._generate_labels(requests, prompts)
        counts = self.stats["label_methods"]
        counts[method] = counts.get(method, 0) + len(res)
        if method != "echo":
            for asked, scores in zip(claims, res):
                if asked:
                    scores.meta["claim_error"] = (f"label method {method}: the server gives no prompt "
                                                  "log-probabilities, so the evidence head was not applied")
        return res

    def _probe(self, req: Request, prompt: str) -> str:
        """The first method (echo, top_logprobs, generate) the server answers with what it needs."""
        lab = req.labels[0]
        a = self._echoed([(req, self.completion(req, prompt + lab, 1, echo=True, logprobs=1))])[0]
        if _echo_logprobs(a, len(prompt), len(prompt + lab)) is not None:
            return "echo"
        a = self.send([(req, self.completion(req, prompt, 1, logprobs=self.top_logprobs))])[0]
        if (a.meta.get("logprobs_raw") or {}).get("top"):
            return "top_logprobs"
        log.warning("%s: the server returns no logprobs; labels are generated and matched (no probabilities)",
                    self.name)
        return "generate"

    def _echo(self, requests: list[Request], prompts: list[str], claims: list[bool]) -> list[LabelScores]:
        jobs = [(r, self.completion(r, p + lab, 1, echo=True, logprobs=1)) for r, p in zip(requests, prompts)
                for lab in r.labels]
        twins = {i: self.prompt(replace(r, messages=r.twin, twin=())) for i, r in enumerate(requests)
                 if claims[i] and r.twin}   # request -> its prompt with an empty reference
        jobs += [(requests[i], self.completion(requests[i], tp + requests[i].labels[0], 1, echo=True, logprobs=1))
                 for i, tp in twins.items()]
        answers = self._echoed(jobs)
        twin_answer = dict(zip(twins, answers[len(answers) - len(twins):]))
        out, k = [], 0
        for i, (r, p) in enumerate(zip(requests, prompts)):
            scores, first = [], answers[k]
            for lab in r.labels:
                s = _echo_logprobs(answers[k], len(p), len(p + lab))
                k += 1
                if s is None:
                    raise ServerError(f"{self.role} server stopped returning prompt logprobs (echo) for "
                                       f"{self.served_name(r.stage)!r}; set label_scoring: top_logprobs")
                scores.append(s)
            out.append(LabelScores(scores, meta={"label_method": "echo"}))
            if i in twins:
                claim = r.fields.claim or ""
                out[-1].claim_logprob = _claim_mean(first, p, claim)
                out[-1].twin_logprob = _claim_mean(twin_answer[i], twins[i], claim)
        return out

    def _label_pieces(self, label: str) -> list[str]:
        """The label's text split at its token boundaries (the model's tokenizer)."""
        ids = self.tokenizer(label, add_special_tokens=False)["input_ids"]
        texts = [self.tokenizer.decode(ids[: j + 1]) for j in range(len(ids))]
        return [t[len(texts[j - 1]):] if j else t for j, t in enumerate(texts)]

    def _top_logprobs(self, requests: list[Request], prompts: list[str]) -> list[Response]:
        pieces = {lab: self._label_pieces(lab) for r in requests for lab in r.labels}
        scores = [[0.0] * len(r.labels) for r in requests]
        bounded: list[set[str]] = [set() for _ in requests]
        depth = max(len(v) for v in pieces.values())
        for j in range(depth):
            jobs, where = [], []
            for i, (r, p) in enumerate(zip(requests, prompts)):
                for k, lab in enumerate(r.labels):
                    if j < len(pieces[lab]):
                        jobs.append(
                            (r, self.completion(r, p + "".join(pieces[lab][:j]), 1, logprobs=self.top_logprobs))
                        )
                        where.append((i, k, lab))
            for (i, k, lab), a in zip(where, self.send(jobs)):
                top = (a.meta.get("logprobs_raw") or {}).get("top") or {}
                if not top:
                    raise ServerError(f"{self.role} server returned no top_logprobs for "
                                       f"{self.served_name(requests[i].stage)!r}; set label_scoring: generate")
                piece = pieces[lab][j]
                if piece in top:
                    scores[i][k] += top[piece]
                else:
                    scores[i][k] += min(top.values())
                    bounded[i].add(lab)
        return [LabelScores(s, meta={"label_method": "top_logprobs", **({"bounded": sorted(b)} if b else {})})
                for s, b in zip(scores, bounded)]

    def _generate_labels(self, requests: list[Request], prompts: list[str]) -> list[LabelScores]:
        n = max(len(self.tokenizer(lab, add_special_tokens=False)["input_ids"]) for r in requests for lab in r.labels)
        answers = self.send([(r, self.completion(r, p, n + 2)) for r, p in zip(requests, prompts)])
        out = []
        for r, a in zip(requests, answers):
            text = a.text.strip()
            match = next((lab for lab in sorted(r.labels, key=len, reverse=True)
                          if text.upper().startswith(lab.upper())), None)
            out.append(LabelScores(None, text=text, label=match, meta={"label_method": "generate"}))
        return out


def _top_at(lp: dict[str, Any], top: list[Any]) -> dict[str, float] | None:
    """The top-logprobs dict of the first generated token (the last list when the prompt was echoed)."""
    first = top[-1] if lp.get("text_offset") and len(top) > 1 else top[0]
    if isinstance(first, list):   # chat-style [{"token", "logprob"}]
        return {d["token"]: float(d["logprob"]) for d in first}
    return {str(k): float(v) for k, v in first.items()} if isinstance(first, dict) else None


def _echo_logprobs(a: Response, start: int, end: int) -> float | None:
    """Sum of the echoed prompt logprobs of the tokens in text ``[start, end)``; None when the answer has
    none, or when a token straddles ``start`` (the label does not begin on a token boundary)."""
    lp = a.meta.get("logprobs_raw") or {}
    offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
    if not offsets or not values or len(offsets) != len(values):
        return None
    if start not in offsets:
        return None
    total, seen = 0.0, False
    for off, v in zip(offsets, values):
        if start <= off < end:
            if v is None:
                return None
            total += float(v)
            seen = True
    return total if seen else None


def _claim_mean(a: Response, prompt: str, claim: str) -> float | None:
    """The mean echoed log-probability of ``claim``'s tokens where it last occurs in ``prompt`` (the prompt ends
    with the claim, then the chat template's closing tokens)."""
    at = prompt.rfind(claim) if claim else -1
    return _echo_mean(a, at, at + len(claim)) if at >= 0 else None


def _echo_mean(a: Response, start: int, end: int) -> float | None:
    """Mean of the echoed prompt logprobs of the tokens that start in text ``[start, end)``; None without them."""
    lp = a.meta.get("logprobs_raw") or {}
    offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
    if not offsets or not values or len(offsets) != len(values):
        return None
    got = [float(v) for off, v in zip(offsets, values) if start <= off < end and v is not None]
    return sum(got) / len(got) if got else None


def server_backend(recipe: Any, role: str = "student", servers: Sequence[str] | None = None,
                   cache_dir: str | None = None, adapters: str | Path | None = None) -> ServerBackend:
    """The recipe's student (its adapters' served names) or base model (``role="base"``) on
    ``servers`` (default ``student.servers``); answers cached under ``cache_dir`` when given. The student's
    evidence heads are read from ``adapters`` (the folder of its stage adapters; default ``train.output_dir``)."""
    from transformers import AutoTokenizer

    from .model_loading import resolve_model

    s, v = recipe.student, recipe.student.serving
    urls = list(servers or s.servers)
    if not urls:
        raise ServerError(f"{role}: no servers (student.servers in the recipe, or --server URL)")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(s.model))
    # every stage with an adapter (the world stage's too when the recipe runs it), under its served name
    stage_models = {st: v.adapters.get(st, st) for st in recipe.adapter_stages()} if role == "student" else {}
    root = Path(adapters or recipe.resolve(recipe.train.output_dir))
    heads = {st: h for st in stage_models if (h := EvidenceHead.load(root / st)) is not None}
    priors = {st: q for st in stage_models if (q := LabelPrior.load(root / st)) is not None}
    served = ServedAdapters(stage_models, heads, priors, root if role == "student" else None)
    return ServerBackend(tokenizer, urls, v, served, chat_template_kwargs=s.chat_template_kwargs, role=role,
                         cache=CallCache(cache_dir) if cache_dir else None)
