"""BEGIN (Dziri et al., 2022b) in its released TSV formats (https://github.com/google/BEGIN-dataset).

* 2022 release: ``wow/begin_{dev,test}_wow.tsv``, ``cmu-dog/begin_{dev,test}_cmu.tsv``,
  ``topicalchat/begin_{dev,test}_tc.tsv`` with columns model_name, data_source, knowledge,
  message, response, begin_label (Fully attributable / Not fully attributable / Generic).
* 2021 release (commit 6f88199, WoW only): ``dev_05_24_21.tsv`` / ``test_05_24_21.tsv`` with
  columns evidence, previous turn, response, gold label (entailment / hallucination /
  contradiction / generic / off-topic), coarse label, full label set.

Each row becomes one conversation: the previous message (user) and the scored response
(assistant) with the knowledge snippet as its reference. Mapping: Fully attributable /
entailment -> faithful; Not fully attributable / hallucination / contradiction -> hallucinated;
Generic / off-topic -> the ``ambiguous`` option (default "hallucinated").

Claims (``claims="response"``): BEGIN judges each response as a whole, so the response can serve as the
turn's one gold claim: Fully attributable / entailment -> VERIFIED, Not fully attributable /
hallucination -> LACKING EVIDENCE, contradiction -> CONTRADICTED, Generic / off-topic -> OUT-OF-SCOPE
(nothing to verify: a turn that is hallucinated under the strict rule, faithful under the safe one).
Default ``"none"``: no claims.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path

from .io import SchemaError
from .loading import (
    AMBIGUOUS,
    DEFAULT_AMBIGUOUS,
    LabelTable,
    LoadResult,
    RowSink,
    UnknownLabel,
    check_claims,
    check_options,
    exchange,
    merge_results,
    norm_label,
    read_delimited,
    resolve,
    response_claim,
    source_files,
    text_key,
)
from .schema import CONTRADICTED, FAITHFUL, HALLUCINATED, LACKING_EVIDENCE, OUT_OF_SCOPE, VERIFIED

SOURCE = "BEGIN"
DOWNLOAD = "https://github.com/google/BEGIN-dataset (2022 TSVs at HEAD; 2021 TSVs in commit 6f88199)"

LABELS_2022 = {"fully attributable": FAITHFUL, "not fully attributable": HALLUCINATED, "generic": AMBIGUOUS}
LABELS_2021 = {"entailment": FAITHFUL, "hallucination": HALLUCINATED, "contradiction": HALLUCINATED,
               "generic": AMBIGUOUS, "off-topic": AMBIGUOUS}
# release -> (knowledge, message, response, label) columns
COLUMNS = {
    "2022": ("knowledge", "message", "response", "begin_label"),
    "2021": ("evidence", "previous turn", "response", "gold label"),
}
CLAIM_LABELS = {"fully attributable": VERIFIED, "entailment": VERIFIED, "not fully attributable": LACKING_EVIDENCE,
                "hallucination": LACKING_EVIDENCE, "contradiction": CONTRADICTED, "generic": OUT_OF_SCOPE,
                "off-topic": OUT_OF_SCOPE}
SPLIT_PATTERNS = ("**/begin_{split}_*.tsv", "**/{split}_*.tsv")


def load_begin(source: str | os.PathLike, *, split: str | None = None,
               ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise",
               label_map: Mapping[str, str] | None = None, claims: str = "none") -> LoadResult:
    """Load a BEGIN TSV (either release, detected from the header), or every BEGIN TSV of
    ``split`` under a directory. ``claims="response"``: the response is the turn's one gold claim."""
    check_options(ambiguous, on_error)
    check_claims(claims)
    files = source_files(source, split, SPLIT_PATTERNS, "BEGIN TSV")
    results = [_load_file(f, ambiguous, on_error, label_map, claims) for f in files]
    return merge_results(results, source, "begin")


def _load_file(path: Path, ambiguous: str, on_error: str, label_map, claims: str) -> LoadResult:
    # The released TSVs are unquoted (text contains bare '"'), so quoting must be off.
    header, rows = read_delimited(path, "\t", csv.QUOTE_NONE)
    if "begin_label" in header:
        release = "2022"
    elif "gold label" in header:
        release = "2021"
    else:
        raise SchemaError(path, f"not a BEGIN TSV: header {header} has neither 'begin_label' (2022 "
                                f"release) nor 'gold label' (2021 release); download: {DOWNLOAD}")
    k_col, m_col, r_col, l_col = COLUMNS[release]
    missing = [c for c in COLUMNS[release] if c not in header]
    if missing:
        raise SchemaError(path, f"BEGIN {release} TSV lacks columns {missing}")
    labels = LabelTable(LABELS_2022 if release == "2022" else LABELS_2021, label_map)
    sink = RowSink(path, "begin", on_error)
    convs = []
    for i, line, rec, extra in rows:
        sink.read()
        if extra:
            sink.malformed(i, f"{len(header) + len(extra)} cells, expected {len(header)} (a tab inside a "
                              "field?)", line=line)
            continue
        bad = next((c for c in (k_col, m_col, r_col, l_col) if rec.get(c) is None), None)
        if bad:
            sink.malformed(i, f"row has {sum(v is not None for v in rec.values())} cells, expected "
                              f"{len(header)}", bad, line)
            continue
        bad = next((c for c in (k_col, r_col, l_col) if not rec[c].strip()), None)
        if bad:
            sink.malformed(i, "empty", bad, line)
            continue
        original = rec[l_col].strip()
        try:
            gold = resolve(labels.classify([original]), ambiguous)
        except UnknownLabel as e:
            sink.malformed(i, str(e), l_col, line)
            continue
        if gold is None:
            sink.drop(i, f"ambiguous label (ambiguous='drop') -- {original}")
            continue
        turn_meta = {"original_label": original}
        if release == "2022":
            turn_meta.update(model=rec.get("model_name"), data_source=rec.get("data_source"))
        else:
            turn_meta.update(coarse_label=rec.get("coarse label"), full_label_set=rec.get("full label set"))
        message = rec[m_col]
        conv = exchange(
            f"{SOURCE}-{path.stem}-{i}", SOURCE, [message] if message.strip() else [], rec[r_col],
            rec[k_col], gold, turn_meta,
            {"benchmark": "begin", "release": release, "file": path.name, "row": i,
             # Several models answered the same (knowledge, message): one dialogue for splitting.
             "dialogue_id": text_key(message, rec[k_col])},
        )
        if claims == "response":
            fallback = VERIFIED if gold == FAITHFUL else LACKING_EVIDENCE   # a label added through label_map
            response_claim(conv.turns[-1], CLAIM_LABELS.get(norm_label(original), fallback))
        convs.append(conv)
        sink.ok()
    return sink.finish(convs)
