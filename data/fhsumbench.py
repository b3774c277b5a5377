"""FHSumBench (the mixed-context study, Findings of ACL 2025; repository cece00/FHSumBench) in its released JSON.

No licence file comes with it: read it from the data root for measurement only; nothing of it is committed
(tests use a fixture written in its shape). File: a JSON list of ``{"source": article, "summary": one
sentence, "label": no_hallu | factual_hallu | non_factual_hallu, "id": int, "hallu_span": the injected span}``.

Each summary becomes a one-turn dialogue: a user request for a one-sentence summary, the summary as the
assistant turn, the article as its reference. Labels (documented choices):

* three-way, the study's (``turn.meta["world_label"]``, compared with the world stage's turn verdict):
  no_hallu -> faithful, factual_hallu -> factual hallucination, non_factual_hallu -> non-factual hallucination;
* VISTA's binary ``gold_label``: no_hallu -> faithful, both hallucination kinds -> hallucinated (a claim the
  article does not support is a hallucination whether or not it is true in the world).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .loading import DEFAULT_AMBIGUOUS, LoadResult, RowSink, check_options, merge_results, source_files
from .schema import ASSISTANT, FAITHFUL, HALLUCINATED, USER, Conversation, Turn

SOURCE = "FHSumBench"
DOWNLOAD = "https://github.com/cece00/FHSumBench (FHSumBench_data.json, before commit 48d74f8)"
REQUEST = "Summarize the article in one sentence."
# the study's labels -> (three-way world label, VISTA turn label)
LABELS = {
    "no_hallu": ("faithful", FAITHFUL),
    "factual_hallu": ("factual hallucination", HALLUCINATED),
    "non_factual_hallu": ("non-factual hallucination", HALLUCINATED),
}
REQUIRED = ("source", "summary", "label", "id")


def load_fhsumbench(source: str | os.PathLike, *, split: str | None = None, ambiguous: str = DEFAULT_AMBIGUOUS,
                    on_error: str = "raise") -> LoadResult:
    """Load FHSumBench JSON file(s) (a file, or a folder holding ``{split}.json``)."""
    check_options(ambiguous, on_error)
    files = source_files(source, split, ("**/{split}.json", "**/*.json"), "FHSumBench JSON", DOWNLOAD)
    return merge_results([_load_file(f, on_error) for f in files], source, SOURCE)


def _load_file(path: Path, on_error: str) -> LoadResult:
    sink = RowSink(path, SOURCE, on_error)
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        sink.read()
        sink.malformed(0, f"not valid JSON ({e})")
        return sink.finish([])
    if not isinstance(rows, list):
        sink.read()
        sink.malformed(0, "expected a JSON list of summaries")
        return sink.finish([])
    convs: list[Conversation] = []
    for i, row in enumerate(rows):
        sink.read()
        where = row.get("id", i) if isinstance(row, dict) else i
        if not isinstance(row, dict):
            sink.malformed(i, "not a JSON object")
            continue
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            sink.malformed(where, "missing", field=missing[0])
            continue
        bad = next((k for k in ("source", "summary") if not isinstance(row[k], str) or not row[k].strip()), None)
        if bad:
            sink.malformed(where, "empty or not a string", field=bad)
            continue
        if row["label"] not in LABELS:
            sink.malformed(where, f"unknown label {row['label']!r} (expected {', '.join(LABELS)})", field="label")
            continue
        world, gold = LABELS[row["label"]]
        convs.append(Conversation(
            id=f"fhsumbench-{row['id']}", source=SOURCE,
            turns=[Turn(USER, REQUEST),
                   Turn(ASSISTANT, row["summary"].strip(), reference=row["source"].strip(), gold_label=gold,
                        meta={"world_label": world, "fhsumbench_label": row["label"],
                              "hallu_span": row.get("hallu_span") or ""})],
            meta={"dialogue_id": f"fhsumbench-{row['id']}"}))
        sink.ok()
    return sink.finish(convs)
