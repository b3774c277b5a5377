"""The VISTA authors' human re-annotation (https://github.com/ashleylew/VISTA,
``data/reannotated_data/human_eval_VISTA_input.json``) through :func:`read_conversations`' parser,
with a load report. Labels are already binary (``gold_label``) with claim-level
``human_claims``, so there is nothing ambiguous to resolve."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .io import SchemaError, conversations_from_authors_json
from .loading import DEFAULT_AMBIGUOUS, LoadResult, RowSink, check_options, source_files

DOWNLOAD = "https://github.com/ashleylew/VISTA (data/reannotated_data/human_eval_VISTA_input.json)"


def load_vista_human(source: str | os.PathLike, *, split: str | None = None,
                     ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise") -> LoadResult:
    """Load the authors' JSON; each conversation is a row. ``ambiguous`` is accepted for a uniform
    interface (the labels are binary already)."""
    check_options(ambiguous, on_error)
    try:
        path = source_files(source, split, ("{split}.json", "human_eval_VISTA_input.json"), "VISTA JSON")[0]
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e}; the re-annotation is published at {DOWNLOAD}") from e
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SchemaError(path, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from e
    if not isinstance(data, list):
        raise SchemaError(path, f"expected a JSON list of conversations, got {type(data).__name__}")
    sink = RowSink(path, "vista-human", on_error)
    sink.read(len(data))
    try:
        convs = conversations_from_authors_json(data, path)
    except SchemaError:
        if on_error == "raise":
            raise
        convs = []
        for ci, raw in enumerate(data):
            try:
                (conv,) = conversations_from_authors_json([raw], path)
            except SchemaError as e:
                where = "".join(f", {k} {v}" for k, v in (("turn", e.turn),) if v is not None)
                field = f", field '{e.field}'" if e.field else ""
                sink.malformed(ci, f"conversation {ci}{where}{field}: {e.message}")
                continue
            if conv.id == f"{Path(path).stem}-0":  # no conversation_id in the data: id by position
                conv.id = f"{Path(path).stem}-{ci}"
            conv.meta["index"] = ci
            convs.append(conv)
    for conv in convs:
        conv.meta.setdefault("benchmark", "vista-human")
        conv.meta.setdefault("dialogue_id", conv.id)
    sink.ok(len(convs))
    return sink.finish(convs)
