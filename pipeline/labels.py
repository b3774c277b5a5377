"""The label layer: what a backend's label log-likelihoods mean, written once for every backend.

A backend answers a label request with each label's summed log-probability (and, for the evidence head, the claim
tokens' mean log-probability in the prompt and in its empty-reference twin, ``Request.twin``); the functions here
turn those numbers into the answer the pipeline reads, the same way for the in-process model, a served model
(echo or top_logprobs) and the rules and human labels:

* :func:`label_answers`: the label prior's shift (backends/label_prior.py, the training sampler's prior put back),
  the softmax over the request's labels and the label chosen, with the raw log-probabilities kept in
  ``meta["logprobs"]``;
* :func:`weigh_evidence`: the claim's PMI with its reference, the label margin and the claim's word overlap with
  the reference in ``meta["evidence"]`` and, with an evidence head (backends/evidence_head.py), the probability
  and label the head gives; one failure record where the claim's log-probabilities are missing;
* :func:`certain_answer`: a rule's or an annotator's label, all the probability on it;
* :func:`answer`: a model backend's ``run`` from its two verbs (``generate``, ``label_logprobs``: pipeline/protocol.py
  ``ModelBackend``), each label answer made by the functions above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..data.schema import UNVERIFIABLE, VERIFIED
from .protocol import Fields, LabelScores, Request, Response


class Head(Protocol):
    """What :func:`weigh_evidence` asks of an evidence head (backends/evidence_head.py ``EvidenceHead``)."""

    def p_verified(self, margin: float, pmi: float, overlap: float = 0.0) -> float: ...

    def says_verified(self, p: float) -> bool: ...


def label_answers(labels: Sequence[str], scores: Any, shift: Mapping[str, float] | None = None,
                  **meta: Any) -> list[Response]:
    """One response per row of ``scores`` (requests x ``labels`` summed log-probabilities): the label with the
    highest score after ``shift`` (per-label log-probability shifts, the label prior), the softmax over the
    shifted scores as ``probs``, the unshifted scores in ``meta["logprobs"]`` and ``meta``'s items besides."""
    import torch

    raw = torch.as_tensor(scores, dtype=torch.float32).reshape(-1, len(labels))
    shifted = raw + torch.tensor([shift.get(lab, 0.0) for lab in labels]) if shift else raw
    probs = torch.softmax(shifted, dim=-1)
    out = []
    for i in range(raw.shape[0]):
        best = labels[int(torch.argmax(shifted[i]))]
        out.append(Response(text=best, label=best, probs={lab: float(probs[i, j]) for j, lab in enumerate(labels)},
                            meta={"logprobs": {lab: float(raw[i, j]) for j, lab in enumerate(labels)}, **meta}))
    return out


def certain_answer(label: str, labels: Sequence[str] = ()) -> Response:
    """``label`` with all the probability on it (over ``labels``, or itself alone)."""
    return Response(text=label, label=label, probs={lab: float(lab == label) for lab in labels or (label,)})


def claim_overlap(fields: Fields) -> float:
    """The share of the claim's content words that the request's reference holds (0 for none)."""
    from .evidence import coverage

    return coverage(fields.claim or "", fields.reference or "") or 0.0


def weigh_evidence(fields: Fields, answer: Response, claim_logprob: float | None, twin_logprob: float | None,
                   head: Head | None) -> None:
    """Put the claim's PMI with its reference (``claim_logprob - twin_logprob``: the claim tokens' mean
    log-probability with the reference and with an empty one), the label margin (VERIFIED minus UNVERIFIABLE) and
    the claim's word overlap with the reference in ``answer.meta["evidence"]``; with ``head``, the probability and
    label the head gives."""
    logprobs = answer.meta.get("logprobs") or {}
    if claim_logprob is None or twin_logprob is None or VERIFIED not in logprobs or UNVERIFIABLE not in logprobs:
        answer.meta["evidence"] = {"error": "claim tokens not found in the prompt"}
        return
    margin, pmi = logprobs[VERIFIED] - logprobs[UNVERIFIABLE], claim_logprob - twin_logprob
    answer.meta["evidence"] = {"margin": margin, "pmi": pmi, "overlap": claim_overlap(fields)}
    if head is not None:
        p = head.p_verified(margin, pmi, answer.meta["evidence"]["overlap"])
        answer.probs = {VERIFIED: p, UNVERIFIABLE: 1.0 - p}
        answer.label = answer.text = VERIFIED if head.says_verified(p) else UNVERIFIABLE
        answer.meta["evidence"]["head"] = True


def head_not_applied(answer: Response, why: str) -> None:
    """The record of an evidence head a backend could not apply (no claim log-probabilities to weigh)."""
    answer.meta["evidence"] = {"error": why}


def answer(backend: Any, requests: list[Request]) -> list[Response]:
    """``backend.run``: generation requests to ``backend.generate``, label requests to ``backend.label_logprobs``
    (to ``generate`` where the backend has no such verb: a chat model's answer is parsed by the engine), and each
    label answer chosen here with the stage's label prior and, where the request has a twin and the stage a head
    (or the backend ``evidence_features``), weighed by its evidence."""
    out: list[Response | None] = [None] * len(requests)
    scores = getattr(backend, "label_logprobs", None)
    gen = [i for i, r in enumerate(requests) if not r.labels or scores is None]
    if gen:
        for i, resp in zip(gen, backend.generate([requests[i] for i in gen])):
            out[i] = resp
    lab = [i for i, r in enumerate(requests) if r.labels and scores is not None]
    if lab:
        heads, priors = getattr(backend, "heads", {}), getattr(backend, "priors", {})
        asked = [requests[i] for i in lab]
        weigh = [bool(r.twin) and (getattr(backend, "evidence_features", False) or r.stage in heads) for r in asked]
        for i, r, w, s in zip(lab, asked, weigh, scores(asked, weigh)):
            out[i] = labelled(r, s, priors.get(r.stage), heads.get(r.stage), w)
    return out  # type: ignore[return-value]


def labelled(request: Request, scores: LabelScores, prior: Any = None, head: Head | None = None,
             weigh: bool = False) -> Response:
    """A label request's answer from its scores: the label chosen with ``prior``'s shift, or the backend's generated
    text; with ``weigh``, the evidence weighed (by ``head`` when given)."""
    meta = dict(scores.meta)
    if scores.logprobs is None:
        resp = Response(text=scores.text, label=scores.label, prompt_tokens=scores.prompt_tokens, meta=meta)
        if prior is not None and meta.get("label_method") == "generate":
            resp.meta["label_prior"] = "not applied: the server gives no label log-probabilities"
    else:
        resp = label_answers(request.labels, [scores.logprobs], prior.shift if prior is not None else None,
                             **meta)[0]
        resp.prompt_tokens = scores.prompt_tokens
        if scores.claim_logprob is not None:
            resp.meta["claim_logprob"] = scores.claim_logprob
    if weigh:
        why = resp.meta.pop("claim_error", None)
        if why is not None:
            head_not_applied(resp, why)
        else:
            weigh_evidence(request.fields, resp, scores.claim_logprob, scores.twin_logprob, head)
    return resp
