"""FineDialFact (Chen et al., 2025): claim-level labels (https://github.com/XiangyanChen/FineDialFact).

Annotated files (``data/HybriDial/...``, ``data/OpendialKG/annotated_test_data.json``; here
``hybridial_dev.json``): a JSON list, one *atomic fact* per record: ``id``, ``history``
([[speaker, text], ...], speakers A = user, B = assistant), ``A`` (the last user message),
``B`` (the dataset's own reply), ``response`` (the reply the fact was taken from; equals ``B``
for type "plain", else a model's reply), ``type``, ``atomic_fact``, ``evidence`` (retrieved
passages {id, title, section, text, selected}), ``isFactualClaim`` (verifiable /
non-verifiable) and ``factualLabel`` (Supports / Refutes / Not Enough Info).
Few-shot file (``few_shot_examples.json``, ``{"results": [...]}``): the same fields without
``response``/``factualLabel``; the label is the final ``Output:`` line of ``fact_check_result``
(True / False / Not enough info), an LLM's worked example rather than a human annotation
(``turn.meta["label_source"]`` says which).

Each record becomes a conversation whose scored assistant turn is ``response`` with one gold
claim: Supports -> VERIFIED, Refutes -> CONTRADICTED, Not Enough Info -> LACKING EVIDENCE. Not
Enough Info on a claim marked non-verifiable (a subjective statement, which VISTA calls out of
scope) is the ``ambiguous`` option: "hallucinated" (default) keeps LACKING EVIDENCE, "faithful"
makes it OUT-OF-SCOPE, "drop" leaves the record out.

Turn label (``turn_label``): only some of a response's facts are annotated, so by default
("none") the turn gets no gold label; "from_claims" applies the released VISTA rule (hallucinated
unless every claim is VERIFIED / OUT-OF-SCOPE / ABSTENTION) to the annotated claims as if they
were complete. The reference is every retrieved passage (``evidence="all"``, as the benchmark
presents them) or only those marked selected (``evidence="selected"``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .io import SchemaError
from .loading import (
    DEFAULT_AMBIGUOUS,
    LoadResult,
    RowSink,
    check_options,
    merge_results,
    source_files,
    text_key,
)
from .schema import (
    ABSTENTION,
    ASSISTANT,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    USER,
    VERIFIED,
    Claim,
    Conversation,
    Turn,
)

SOURCE = "FineDialFact"
DOWNLOAD = "https://github.com/XiangyanChen/FineDialFact (data/*/annotated_test_data.json)"
CLAIM_LABELS = {"supports": VERIFIED, "refutes": CONTRADICTED, "not enough info": LACKING_EVIDENCE,
                # few-shot worked examples answer True / False / Not enough info
                "true": VERIFIED, "false": CONTRADICTED}
SAFE = (VERIFIED, OUT_OF_SCOPE, ABSTENTION)
TURN_LABEL_CHOICES = ("none", "from_claims")
EVIDENCE_CHOICES = ("all", "selected")
SPEAKERS = {"a": USER, "b": ASSISTANT}
_OUTPUT = re.compile(r"^\W*output\W*:\W*(.+?)\W*$", re.IGNORECASE)


def load_finedialfact(source: str | os.PathLike, *, split: str | None = None,
                      ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise",
                      turn_label: str = "none", evidence: str = "all") -> LoadResult:
    """Load a FineDialFact annotated (or few-shot) JSON file, or every JSON file under a directory."""
    check_options(ambiguous, on_error)
    if turn_label not in TURN_LABEL_CHOICES:
        raise ValueError(f"turn_label must be one of {TURN_LABEL_CHOICES}, got {turn_label!r}")
    if evidence not in EVIDENCE_CHOICES:
        raise ValueError(f"evidence must be one of {EVIDENCE_CHOICES}, got {evidence!r}")
    files = source_files(source, split, ("**/{split}*.json", "**/*{split}*.json"), "FineDialFact JSON")
    results = [_load_file(f, ambiguous, on_error, turn_label, evidence) for f in files]
    return merge_results(results, source, "finedialfact")


def _load_file(path: Path, ambiguous: str, on_error: str, turn_label: str, evidence: str) -> LoadResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SchemaError(path, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from e
    few_shot = isinstance(data, dict) and isinstance(data.get("results"), list)
    records = data["results"] if few_shot else data
    if not isinstance(records, list):
        raise SchemaError(path, "expected a JSON list of atomic facts or {\"results\": [...]}; "
                                f"FineDialFact is published at {DOWNLOAD}")
    sink = RowSink(path, "finedialfact", on_error)
    convs = []
    for i, rec in enumerate(records, start=1):
        sink.read()
        conv = _record(path, i, rec, few_shot, ambiguous, turn_label, evidence, sink)
        if conv is not None:
            convs.append(conv)
            sink.ok()
    return sink.finish(convs)


def _record(path: Path, i: int, rec: Any, few_shot: bool, ambiguous: str, turn_label: str,
            evidence: str, sink: RowSink) -> Conversation | None:
    if not isinstance(rec, dict):
        sink.malformed(i, f"expected a JSON object, got {type(rec).__name__}")
        return None
    reply = "B" if few_shot else "response"
    for key in ("id", "atomic_fact", "history", "A", reply, "evidence"):
        if rec.get(key) is None:
            sink.malformed(i, "missing", key)
            return None
    for key in ("atomic_fact", "A", reply):
        if not isinstance(rec[key], str) or not rec[key].strip():
            sink.malformed(i, "expected a non-empty string", key)
            return None
    hist = rec["history"]
    if not isinstance(hist, list) or not all(
            isinstance(h, list) and len(h) == 2 and str(h[0]).strip().lower() in SPEAKERS
            and isinstance(h[1], str) for h in hist):
        sink.malformed(i, "expected a list of [speaker A/B, text] pairs", "history")
        return None
    ev = rec["evidence"]
    if not isinstance(ev, list) or not all(isinstance(e, dict) and isinstance(e.get("text"), str)
                                           for e in ev):
        sink.malformed(i, "expected a list of passages with 'text'", "evidence")
        return None

    if few_shot:
        out = [m.group(1) for line in str(rec.get("fact_check_result", "")).splitlines()
               if (m := _OUTPUT.match(line.strip()))]
        if not out:
            sink.malformed(i, "no 'Output: ...' line to take the label from", "fact_check_result")
            return None
        original, source_of_label = out[-1], "few-shot worked example (LLM output)"
    else:
        original, source_of_label = rec.get("factualLabel"), "human annotation"
        if not isinstance(original, str):
            sink.malformed(i, "missing", "factualLabel")
            return None
    category = CLAIM_LABELS.get(" ".join(original.lower().split()))
    if category is None:
        sink.malformed(i, f"unknown label {original!r}; expected Supports / Refutes / Not Enough Info",
                       "fact_check_result" if few_shot else "factualLabel")
        return None
    non_verifiable = str(rec.get("isFactualClaim", "")).strip().lower() == "non-verifiable"
    if category == LACKING_EVIDENCE and non_verifiable:
        if ambiguous == "drop":
            sink.drop(i, f"ambiguous label (ambiguous='drop') -- {original} on a non-verifiable claim")
            return None
        if ambiguous == "faithful":
            category = OUT_OF_SCOPE

    passages = [e for e in ev if evidence == "all" or e.get("selected")]
    reference = "\n\n".join(f"{e.get('title', '')}\n{e['text'].strip()}".strip() for e in passages)
    gold = None
    if turn_label == "from_claims":
        gold = FAITHFUL if category in SAFE else HALLUCINATED
    turns = [Turn(SPEAKERS[str(s).strip().lower()], t) for s, t in hist]
    turns.append(Turn(USER, rec["A"]))
    turns.append(Turn(ASSISTANT, rec[reply], reference=reference, gold_label=gold,
                      gold_claims=[Claim(rec["atomic_fact"], category)],
                      meta={"original_label": original, "label_source": source_of_label,
                            "claims_complete": False,   # one annotated fact, not the turn's decomposition
                            "is_factual_claim": rec.get("isFactualClaim"), "model": rec.get("type"),
                            "dataset_reply": rec.get("B"),
                            "selected_evidence": [e.get("id") for e in ev if e.get("selected")]}))
    return Conversation(id=f"{SOURCE}-{path.stem}-{rec['id']}", source=SOURCE, turns=turns,
                        meta={"benchmark": "finedialfact", "file": path.name, "row": i,
                              # several facts come from one dialogue: keep them on one side of a split
                              "dialogue_id": text_key(*(t for _, t in hist), rec["A"])})
