"""What the pipeline engine asks of a model backend (local transformers, OpenAI-compatible server, ...)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Fields:
    """What the pipeline knows of a request, as fields: its ``messages`` are these rendered (pipeline/templates.py
    ``stage_request``), and a backend reads these, never the rendered text."""

    target: str | None = None                    # stages 1 and 4: the assistant turn decomposed
    history: tuple[tuple[str, str], ...] = ()    # stages 1 and 4: (role, text) of the turns before it
    claim: str | None = None                     # stages 2, 3 and world
    reference: str | None = None                 # stages 2 and 3: the turn's reference (or one chunk of it)
    background: tuple[str, ...] = ()             # stages 2 and 3: the background claims numbered from first_fact
    first_fact: int = 1
    evidence: tuple[str, ...] = ()               # world stage: the passages found for the claim


@dataclass(frozen=True)
class Request:
    """One prompt for one stage.

    ``labels`` empty: free generation. ``labels`` given: the backend gives each label's log-likelihood (local
    models score it; remote ones may generate and parse) and the label layer (pipeline/labels.py) picks one.
    ``twin``: the same prompt's messages with an empty reference (a stage 2 label request with a claim: the
    evidence head's PMI scores the claim's tokens in both).
    """

    stage: str
    messages: tuple[dict[str, str], ...]
    labels: tuple[str, ...] = ()
    max_new_tokens: int = 256
    stop_on_repeat: bool = False  # list outputs: stop once a line repeats an earlier one (degenerate loop); the
    # in-process backend also bans a digit, period or line break right after a list marker ("1.1.1...")
    fields: Fields = Fields()
    twin: tuple[dict[str, str], ...] = ()


@dataclass
class Response:
    text: str
    label: str | None = None
    probs: dict[str, float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    meta: dict = field(default_factory=dict)


@dataclass
class LabelScores:
    """A model's answer to a label request: each label's summed log-probability (in the request's label order; None
    where it could not score them: ``meta["error"]`` says why, or ``text`` holds a generated answer the engine
    parses), and where asked, the claim tokens' mean log-probability in the prompt and in its twin."""

    logprobs: list[float] | None
    claim_logprob: float | None = None
    twin_logprob: float | None = None
    text: str = ""
    label: str | None = None   # a generated answer matched to a label (no log-probabilities to choose by)
    prompt_tokens: int = 0
    meta: dict = field(default_factory=dict)


class ModelBackend(Protocol):
    """A model answers two verbs over structured requests, in request order; what the label log-likelihoods mean
    (the label prior, the softmax, the evidence head) is the label layer's (pipeline/labels.py ``answer``), which
    gives a model backend its :meth:`Backend.run`.

    ``heads`` and ``priors`` (stage -> evidence head, label prior: what the adapters' folders hold) are the state
    the label layer applies; ``evidence_features`` asks for the claim log-probabilities of every stage 2 request
    with a twin, head or not."""

    heads: dict[str, Any]
    priors: dict[str, Any]

    def generate(self, requests: list[Request]) -> list[Response]:
        """Free generation of each request (``max_new_tokens``, and the list stop rules with ``stop_on_repeat``)."""
        ...

    def label_logprobs(self, requests: list[Request], claims: list[bool]) -> list[LabelScores]:
        """Each label's log-probability after each request's prompt; where ``claims[i]``, also the claim tokens'
        mean log-probability in the prompt and in ``requests[i].twin``."""
        ...


class Backend(Protocol):
    """Runs a batch of requests; output i answers request i. Must be deterministic per request,
    whatever else is in the batch, so batched and one-at-a-time runs agree.

    A request with ``labels`` is answered with one of them (``Response.label``: scored by likelihood,
    or generated and parsed); one without is free generation. ``stats`` holds the backend's counters
    (requests, calls, cache hits, failures, tokens, timings: whichever it keeps; empty when none), and
    ``progress``, when set, is told how many requests were answered, as they are (progress bars).

    What callers read besides: ``served`` (answers come from HTTP servers), ``hardware`` (where an in-process
    model computes: a ``runtime.hardware.RunHardware``; None when served or when no model runs) and
    :meth:`describe`."""

    name: str
    stats: dict[str, Any]
    progress: Callable[[int], None] | None
    served: bool
    hardware: Any

    def run(self, requests: list[Request]) -> list[Response]: ...

    def describe(self) -> dict[str, Any]:
        """What answers (JSON-ready, stable over a run: it names a run's journal): backend, model, adapters or
        servers; a served backend adds its label-scoring method and replica events."""
        ...
