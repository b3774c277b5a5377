"""The VISTA authors' human re-annotation (https://github.com/ashleylew/VISTA,
``data/reannotated_data/human_eval_VISTA_input.json``) through :func:`read_conversations`' parser,
with a load report. Labels are already binary (``gold_label``) with claim-level
``human_claims``, so there is nothing ambiguous to resolve."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..download.catalogue import Remote, Source, Subset, gh
from ..io import SchemaError, conversations_from_authors_json
from ..loading import DEFAULT_AMBIGUOUS, LoadResult, RowSink, source_files, validate_options
from .entry import Benchmark

DOWNLOAD = "https://github.com/ashleylew/VISTA (data/reannotated_data/human_eval_VISTA_input.json)"


def load_vista_human(source: str | os.PathLike, *, split: str | None = None,
                     ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise") -> LoadResult:
    """Load the authors' JSON; each conversation is a row. ``ambiguous`` is accepted for a uniform
    interface (the labels are binary already)."""
    validate_options(ambiguous, on_error)
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


# What `vista-distill data fetch vista-human` downloads (the pinned commit and sha256s: data/download/catalogue.py)
VISTA, VISTA_HEAD = "ashleylew/VISTA", "44250f49957b10291a24a68d1d0703968df0063a"


# sha256 of json.dumps(conversation, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
# first 16 hex digits, in the order of vista_human/dev.json (the conversations carry no ids).
DEV_KEYS = tuple("""
a0872f344e3f6dba 2103c6d1c7f28251 aaa066a9fb93fb6b bd82a4917208d255 e7c97566ea07a2c7 9575fd5027f3ef01
45b6f148b5fa2032 7d7b41e48898dbb0 0eb38997fe306b52 656bdc2875f365ef c2ed922418041422 9415840b833c51bd
784ba555884242f9 7388af577bf685d9 72365544d3fc6664 1e7cfe363ddb87db a3fad11e765ca85e b74dca36fba127ca
f8fc28158b162892 d1714a7daf9fa37b c15085bd02d112f0 49d78e3be804c473 ed23aab936b3179f 03a5f899aa53d30e
4dd9abfecb005248 ac6bb2fde18de28d 90b1fd2ae1aeeef7 36f2a967334bae09 237a3e512e23fbcb 30439768e7dd7eed
88c897c6046b7988 ea32701e07f68be5 9d7cd181370994ab 05af6749f8ba107e 0b4266cc4105ea7c
""".split())


FETCH = Source(
    "vista_human", "VISTA human re-annotated conversations (Lewis et al.)", f"https://github.com/{VISTA}",
    "none stated (README: 'License: [Add license here]'): research use",
    "no: no licence grants redistribution; fetch it instead (small test fixtures only)",
    (Remote("vista_human/human_eval_VISTA_input.json",
            gh(VISTA, VISTA_HEAD, "data/reannotated_data/human_eval_VISTA_input.json")),),
    subsets=(Subset("vista_human/dev.json", "vista_human/human_eval_VISTA_input.json",
                    DEV_KEYS, None,
                    "416e2837e2a6edd9e0fef10a05c0893afe28c7c04402b6936011629c737e3ae8",
                    "the project's dev split: 35 of the 140 conversations"),))

BENCHMARKS = (Benchmark("vista-human", load_vista_human, "VISTA authors' human re-annotation JSON",
                        path_keys=("vista_human", "vista-human"), file_patterns=("vista*",)),)
