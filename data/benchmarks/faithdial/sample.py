"""The bundled FaithDial samples (``data/samples/faithdial_*.jsonl``), rebuilt from FaithDial's data-audit files
(McGill-NLP/FaithDial ``data-audit/``, MIT License, Copyright (c) 2022 Nouha Dziri) read by the ``faithdial-audit``
loader. Each file's ``meta.file`` names the release's path, not the local one.

* ``faithdial_wow_sample.jsonl`` (tests): 80 conversations of ``gold/wow.csv`` sampled with seed 0, unchanged.
* ``faithdial_balanced_sample.jsonl`` (the demo's test material): of the ``gold/`` files, every response annotated
  Entailment (faithful) and as many of the Hallucination / Partial Hallucination ones drawn with seed 0 (Generic
  and Uncooperative left out: no agreed VISTA mapping), so a constant answer scores 50% on any random split.
* ``faithdial_models_{validation,train}.jsonl``: the annotated model responses (``CTRL/``, ``DoHA/``, ``GPT2/``):
  validation 100 + 100 drawn with seed 0, train the other faithful ones and as many hallucinated ones (seed 1).

* ``faithdial_scope_train.jsonl`` (the demo's stage-3 material for VISTA's safe categories, training only): every
  response of the ``gold/`` and model files annotated Generic, and every one with a clear abstention ("I don't know
  ...", "I'm not sure ...") annotated Entailment, Hallucination or Partial Hallucination (Uncooperative ones left
  out), read with ``claims="response+abstention"`` (the loader's docstring: Generic -> OUT-OF-SCOPE, the abstention
  clause -> ABSTENTION, the rest of the response per its label). Left out: the rows of the three files above, and
  rows sharing a reference with the balanced sample (the demo's test, split by reference: none moves to training),
  ``vista_human/dev.json``, BEGIN-WoW's ``begin_dev_wow.tsv`` or FADE's ``human_verified_500.csv`` (whose
  validation rows the demo uses). Rows sharing a reference with the model-response validation file are kept, as
  its training counterpart does (128 of its 200 responses answer a snippet that a training response answers: the
  three models responded to the same contexts).

In the balanced and model-response files each response is its turn's one gold claim, VERIFIED for a faithful
response and LACKING EVIDENCE for a hallucinated one (DialFact's ``claims: response`` choice; not a decomposition, so
``claims_complete`` is false: stage 2 and 3 examples, no stage-1 example).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ...io import read_conversations, write_conversations
from ...loading import normalise_text, split_labels
from ...sampling import sample_conversations
from ...schema import ABSTENTION, OUT_OF_SCOPE, Claim, Conversation
from ...splits import reference_keys
from ..samples import SAMPLES
from . import claim_category, load_faithdial_audit

GOLD_LABELS = {"Entailment": "VERIFIED", "Hallucination": "LACKING EVIDENCE",
               "Partial Hallucination": "LACKING EVIDENCE"}


def _response_claim(c: Conversation, label: str) -> Conversation:
    turn = c.turns[-1]
    turn.gold_claims = [Claim(" ".join(turn.text.split()), label)]
    turn.meta["claims_complete"] = False            # the response as is, not a decomposition
    turn.meta["claims_source"] = "response as one claim (BEGIN label)"
    return c


def build_wow_sample(audit: Path, out: Path = SAMPLES, n: int = 80, seed: int = 0) -> str:
    convs = load_faithdial_audit(audit / "gold" / "wow.csv").conversations
    for c in convs:
        c.meta["file"] = "data-audit/gold/wow.csv"
    write_conversations(sample_conversations(convs, n, seed=seed), out / "faithdial_wow_sample.jsonl")
    return f"faithdial_wow_sample.jsonl: {n} of {len(convs)} conversations"


def build_balanced(audit: Path, out: Path = SAMPLES, seed: int = 0) -> str:
    faithful, hallucinated = [], []
    for name in ("wow", "cmu", "topical"):
        for c in load_faithdial_audit(audit / "gold" / f"{name}.csv", ambiguous="drop",
                                      on_error="reject").conversations:
            label = GOLD_LABELS.get(c.turns[-1].meta.get("original_label", "").strip())
            if label is None:
                continue
            c.meta["file"] = f"data-audit/gold/{name}.csv"
            (faithful if label == "VERIFIED" else hallucinated).append(_response_claim(c, label))
    picked = faithful + random.Random(seed).sample(hallucinated, len(faithful))
    picked.sort(key=lambda c: c.id)
    write_conversations(picked, out / "faithdial_balanced_sample.jsonl")
    return (f"faithdial_balanced_sample.jsonl: {len(faithful)} faithful + {len(faithful)} of {len(hallucinated)} "
            "hallucinated conversations")


def build_models(audit: Path, out: Path = SAMPLES) -> list[str]:
    faithful, hallucinated = [], []
    for path in sorted(audit.glob("[CDG]*/*.csv")):
        for c in load_faithdial_audit(path, ambiguous="drop", on_error="reject").conversations:
            c.meta["file"] = f"data-audit/{path.parent.name}/{path.name}"
            label = "VERIFIED" if c.turns[-1].gold_label == "faithful" else "LACKING EVIDENCE"
            (faithful if label == "VERIFIED" else hallucinated).append(_response_claim(c, label))
    rng = random.Random(0)
    val_f, val_h = rng.sample(faithful, 100), rng.sample(hallucinated, 100)
    taken = {c.id for c in val_f + val_h}
    rest_f = [c for c in faithful if c.id not in taken]
    rest_h = [c for c in hallucinated if c.id not in taken]
    train = rest_f + random.Random(1).sample(rest_h, len(rest_f))
    said = []
    for name, picked in (("validation", val_f + val_h), ("train", train)):
        write_conversations(picked, out / f"faithdial_models_{name}.jsonl")
        said.append(f"faithdial_models_{name}.jsonl: {len(picked)} responses")
    return said


SCOPE_FILE = "faithdial_scope_train.jsonl"


def _held_out_references(data: Path, out: Path) -> set[str]:
    """Normalised references no scope row may share: the demo's test and validation material (see the docstring)."""
    from ..begin import load_begin
    from ..fade import load_fade

    refs = set().union(*(reference_keys(c) for c in read_conversations(out / "faithdial_balanced_sample.jsonl")))
    for conv in json.loads((data / "vista_human" / "dev.json").read_text()):
        refs |= {normalise_text(t.get("retrieved_document") or "") for t in conv}
    for result in (load_begin(data / "begin" / "wow" / "begin_dev_wow.tsv", on_error="reject"),
                   load_fade(data / "fade" / "data" / "human_verified_500.csv", on_error="reject")):
        refs |= set().union(*(reference_keys(c) for c in result.conversations))
    return refs - {""}


def build_scope(audit: Path, data: Path, out: Path = SAMPLES) -> str:
    taken = {c.id for name in ("faithdial_balanced_sample.jsonl", "faithdial_models_train.jsonl",
                               "faithdial_models_validation.jsonl") for c in read_conversations(out / name)}
    held = _held_out_references(data, out)
    picked: list[Conversation] = []
    for path in [*sorted((audit / "gold").glob("*.csv")), *sorted(audit.glob("[CDG]*/*.csv"))]:
        for c in load_faithdial_audit(path, claims="response+abstention", on_error="reject").conversations:
            turn = c.turns[-1]
            labels = {x.lower() for x in split_labels(turn.meta["original_label"])}
            if c.id in taken or reference_keys(c) & held or "uncooperative" in labels or not turn.gold_claims:
                continue
            if claim_category(sorted(labels)) == OUT_OF_SCOPE or any(x.label == ABSTENTION for x in turn.gold_claims):
                c.meta["file"] = f"data-audit/{path.parent.name}/{path.name}"
                for claim in turn.gold_claims:
                    claim.text = " ".join(claim.text.split())     # as the other FaithDial samples' claims
                turn.meta["claims_source"] = "response as its claims (BEGIN label, abstention split off)"
                picked.append(c)
    write_conversations(picked, out / SCOPE_FILE)
    claims = [x.label for c in picked for x in c.turns[-1].gold_claims]
    return (f"{SCOPE_FILE}: {len(picked)} responses, claims OUT-OF-SCOPE {claims.count(OUT_OF_SCOPE)}, ABSTENTION "
            f"{claims.count(ABSTENTION)}, other {len(claims) - claims.count(OUT_OF_SCOPE) - claims.count(ABSTENTION)}")


def build_samples(data: Path, out: Path = SAMPLES) -> list[str]:
    audit = data / "faithdial" / "data-audit"
    return [build_wow_sample(audit, out), build_balanced(audit, out), *build_models(audit, out),
            build_scope(audit, data, out)]
