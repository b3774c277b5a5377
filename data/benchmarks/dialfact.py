"""DialFact (Gupta et al., 2022) in its released JSONL format (https://github.com/salesforce/DialFact).

Files: ``data/valid_split.jsonl``, ``data/test_split.jsonl`` and the sample
``scripts/testsmall.jsonl``. One record per line: ``context_id``, ``id``, ``context`` (list of
utterances), ``response``, ``evidence_list`` ([title, url, snippet, index, (flag)] items),
``response_label`` (SUPPORTS / REFUTES / NOT ENOUGH INFO), ``type_label`` (factual / personal).

Mapping: SUPPORTS -> faithful; REFUTES -> hallucinated; NOT ENOUGH INFO on a factual response ->
hallucinated (lacking evidence); NOT ENOUGH INFO on a personal response (an opinion or personal
experience, which VISTA would call out of scope) -> the ``ambiguous`` option. The reference is
the evidence snippets, each as "title\\nsnippet", separated by blank lines.

Claims (``claims="response"``): DialFact verifies each response as one claim (its responses are
single-sentence claims, Gupta et al. 2022 section 3), so the response can serve as the turn's one
gold claim: SUPPORTS -> VERIFIED, REFUTES -> CONTRADICTED, NOT ENOUGH INFO -> LACKING EVIDENCE on a
factual response and OUT-OF-SCOPE on a personal one. ``claims="response+abstention"``: a clear
abstention in the response ("I don't know ...", "I'm not sure ...") is split off as its own ABSTENTION
claim and the rest keeps the label (:func:`..loading.response_claims`). Default ``"none"``: no claims.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..download.catalogue import Manual, Source, repo_files
from ..loading import (
    AMBIGUOUS,
    DEFAULT_AMBIGUOUS,
    LabelTable,
    LoadResult,
    RowSink,
    UnknownLabel,
    exchange,
    merge_results,
    resolve,
    response_claim,
    source_files,
    validate_claims_option,
    validate_options,
)
from ..schema import CONTRADICTED, FAITHFUL, HALLUCINATED, LACKING_EVIDENCE, OUT_OF_SCOPE, VERIFIED
from .entry import Benchmark

SOURCE = "DialFact"
DOWNLOAD = "https://github.com/salesforce/DialFact (data/valid_split.jsonl, data/test_split.jsonl)"
LABELS = {"supports": FAITHFUL, "refutes": HALLUCINATED, "not enough info": HALLUCINATED,
          "not enough info/personal": AMBIGUOUS}
SPLIT_PATTERNS = ("**/{split}_split.jsonl", "**/{split}*.jsonl")
CLAIM_LABELS = {"supports": VERIFIED, "refutes": CONTRADICTED, "not enough info": LACKING_EVIDENCE,
                "not enough info/personal": OUT_OF_SCOPE}


def render_evidence(evidence: list) -> str:
    return "\n\n".join(f"{e[0]}\n{e[2]}".strip() for e in evidence)


def load_dialfact(source: str | os.PathLike, *, split: str | None = None, ambiguous: str = DEFAULT_AMBIGUOUS,
                  on_error: str = "raise", label_map: Mapping[str, str] | None = None,
                  claims: str = "none") -> LoadResult:
    """Load a DialFact JSONL file (or ``{split}_split.jsonl`` under a directory).

    ``label_map`` keys are the normalised labels above; "not enough info/personal" is NEI on a
    personal response. ``claims="response"``: the response is the turn's one gold claim (see above).
    """
    validate_options(ambiguous, on_error)
    validate_claims_option(claims)
    files = source_files(source, split, SPLIT_PATTERNS, "DialFact JSONL", download=DOWNLOAD)
    labels = LabelTable(LABELS, label_map)
    return merge_results([_load_file(f, labels, ambiguous, on_error, claims) for f in files], source, "dialfact")


def _load_file(path: Path, labels: LabelTable, ambiguous: str, on_error: str, claims: str) -> LoadResult:
    sink = RowSink(path, "dialfact", on_error)
    convs = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            sink.read()
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sink.malformed(i, f"not valid JSON ({e.msg}, column {e.colno})")
                continue
            err = _check(rec)
            if err:
                sink.malformed(i, err[1], err[0])
                continue
            original = rec["response_label"]
            personal = str(rec.get("type_label", "")).strip().lower() == "personal"
            nei = original.strip().upper() == "NOT ENOUGH INFO"
            key = original + ("/personal" if personal and nei else "")
            try:
                gold = resolve(labels.classify([key]), ambiguous)
            except UnknownLabel as e:
                sink.malformed(i, str(e), "response_label")
                continue
            if gold is None:
                sink.drop(i, f"ambiguous label (ambiguous='drop') -- {key}")
                continue
            conv = exchange(
                f"{SOURCE}-{rec['id']}", SOURCE, rec["context"], rec["response"],
                render_evidence(rec["evidence_list"]), gold,
                {"original_label": original, "type_label": rec.get("type_label"),
                 "data_type": rec.get("data_type"),
                 "evidence_titles": [e[0] for e in rec["evidence_list"]]},
                {"benchmark": "dialfact", "file": path.name, "row": i,
                 # Several responses continue one context: one dialogue for splitting.
                 "dialogue_id": str(rec.get("context_id") or rec["id"]).split("--")[0]},
            )
            if claims != "none":
                response_claim(conv.turns[-1], CLAIM_LABELS[key.strip().lower()], claims)
            convs.append(conv)
            sink.ok()
    return sink.finish(convs)


def _check(rec) -> tuple[str | None, str] | None:
    if not isinstance(rec, dict):
        return None, f"expected a JSON object, got {type(rec).__name__}"
    for key in ("id", "context", "response", "response_label", "evidence_list"):
        if key not in rec or rec[key] is None:
            return key, "missing"
    if not isinstance(rec["context"], list) or not all(isinstance(c, str) for c in rec["context"]):
        return "context", "expected a list of strings"
    if not isinstance(rec["response"], str) or not rec["response"].strip():
        return "response", "expected a non-empty string"
    if not isinstance(rec["response_label"], str):
        return "response_label", "expected a string"
    ev = rec["evidence_list"]
    if not isinstance(ev, list) or not all(isinstance(e, list) and len(e) >= 3 for e in ev):
        return "evidence_list", "expected a list of [title, url, snippet, ...] items"
    return None


# What `vista-distill data fetch dialfact` downloads (the pinned commit and sha256s: data/download/catalogue.py)
DIALFACT, DIALFACT_HEAD = "salesforce/DialFact", "d400b250147e45c106b18e52254b1060f7c1575d"

FETCH = Source(
    "dialfact", "DialFact (Gupta et al., 2022): the small test file of the release",
    f"https://github.com/{DIALFACT}", "BSD-3-Clause", "yes, with LICENSE.txt",
    repo_files(DIALFACT, DIALFACT_HEAD, "dialfact", [
        ("LICENSE.txt", "0f3764c856b8d4e6e1aa275bce9f34925a7b0612172c6b57713b5c0f1dab0a6e"),
        ("README.md", "084335d0ec9f40787c07a87e8ba64bc728df220ce288d7127028dc91c148cdd4"),
        ("scripts/README.md", "70392dd82c89dd9d70fcfb1e6daaf0043f381eab3d6a7d2d774597da94ce5a7c"),
        ("scripts/testsmall.jsonl", "cc7c258131e08005096f4a1bd9574a478687c64cb7d6d36b7eb52d9b825e1d3d"),
    ]),
    manual=(Manual("dialfact/data/", "the full valid / test splits (data/valid_split.jsonl, "
                                     f"data/test_split.jsonl in https://github.com/{DIALFACT}) are not "
                                     "fetched: their contents could not be checked when this entry "
                                     "was written"),))

BENCHMARKS = (Benchmark("dialfact", load_dialfact, "DialFact JSONL", path_keys=("dialfact",),
                        first_line_keys=("response_label",)),)
