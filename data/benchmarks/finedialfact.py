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

from ..download.catalogue import Remote, Source, Subset, gh, repo_files
from ..io import SchemaError
from ..loading import (
    DEFAULT_AMBIGUOUS,
    LoadResult,
    RowSink,
    merge_results,
    source_files,
    text_key,
    validate_options,
)
from ..schema import (
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
from .entry import Benchmark

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
    validate_options(ambiguous, on_error)
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


# What `vista-distill data fetch finedialfact` downloads (the pinned commit and sha256s: data/download/catalogue.py)
FINEDIALFACT, FINEDIALFACT_HEAD = "XiangyanChen/FineDialFact", "21957e56650ad1d13b1b6face4e2daa30193a765"


# ``id`` of the atomic facts in finedialfact/hybridial_dev.json, in order.
DEV_KEYS = tuple("""
dialogue-100 dialogue-104 dialogue-105 dialogue-106 dialogue-107 dialogue-110 dialogue-111 dialogue-112
dialogue-115 dialogue-116 dialogue-117 dialogue-118 dialogue-120 dialogue-122 dialogue-124 dialogue-125
dialogue-127 dialogue-131 dialogue-132 dialogue-133 dialogue-134 dialogue-136 dialogue-137 dialogue-138
dialogue-141 dialogue-143 dialogue-145 dialogue-146 dialogue-147 dialogue-149 dialogue-150 dialogue-152
dialogue-153 dialogue-154 dialogue-156 dialogue-157 dialogue-158 dialogue-161 dialogue-163 dialogue-164
dialogue-166 dialogue-167 dialogue-169 dialogue-172 dialogue-173 dialogue-174 dialogue-175 dialogue-176
dialogue-177 dialogue-178 dialogue-180 dialogue-181 dialogue-183 dialogue-185 dialogue-186 dialogue-188
dialogue-189 dialogue-190 dialogue-191 dialogue-192 dialogue-196 dialogue-197 dialogue-198 dialogue-200
dialogue-201 dialogue-203 dialogue-204 dialogue-209 dialogue-212 dialogue-213 dialogue-215 dialogue-219
dialogue-220 dialogue-222 dialogue-223 dialogue-226 dialogue-227 dialogue-228 dialogue-229 dialogue-230
dialogue-231 dialogue-232 dialogue-233 dialogue-236 dialogue-237 dialogue-238 dialogue-240 dialogue-246
dialogue-248 dialogue-250 dialogue-253 dialogue-254 dialogue-255 dialogue-256 dialogue-257 dialogue-258
dialogue-259 dialogue-261 dialogue-266 dialogue-267 dialogue-269 dialogue-270 dialogue-271 dialogue-272
dialogue-274 dialogue-275 dialogue-277 dialogue-280 dialogue-281 dialogue-282 dialogue-283 dialogue-284
dialogue-286 dialogue-287 dialogue-289 dialogue-290 dialogue-291 dialogue-292 dialogue-293 dialogue-295
dialogue-300 dialogue-302 dialogue-303 dialogue-305 dialogue-309 dialogue-310 dialogue-311 dialogue-314
dialogue-316 dialogue-320 dialogue-321 dialogue-323 dialogue-324 dialogue-325 dialogue-326 dialogue-327
dialogue-328 dialogue-329 dialogue-331 dialogue-337 dialogue-339 dialogue-343 dialogue-346 dialogue-348
dialogue-351 dialogue-352 dialogue-353 dialogue-354 dialogue-355 dialogue-356 dialogue-357 dialogue-358
dialogue-359 dialogue-360 dialogue-361 dialogue-362 dialogue-363 dialogue-364 dialogue-366 dialogue-368
dialogue-369 dialogue-370 dialogue-371 dialogue-372 dialogue-373 dialogue-376 dialogue-377 dialogue-378
dialogue-380 dialogue-381 dialogue-382 dialogue-384 dialogue-385 dialogue-391 dialogue-392 dialogue-395
dialogue-396 dialogue-397 dialogue-398 dialogue-399 dialogue-400 dialogue-403 dialogue-404 dialogue-406
dialogue-409 dialogue-413 dialogue-414 dialogue-415 dialogue-417 dialogue-418 dialogue-419 dialogue-420
dialogue-421 dialogue-422 dialogue-423 dialogue-425 dialogue-427 dialogue-429 dialogue-431 dialogue-433
dialogue-435 dialogue-436 dialogue-440 dialogue-441 dialogue-443 dialogue-445 dialogue-446 dialogue-447
dialogue-450 dialogue-452 dialogue-453 dialogue-454 dialogue-455 dialogue-456 dialogue-458 dialogue-460
dialogue-461 dialogue-462 dialogue-466 dialogue-467 dialogue-468 dialogue-470 dialogue-471 dialogue-472
dialogue-474 dialogue-475 dialogue-476 dialogue-477 dialogue-478 dialogue-479 dialogue-480 dialogue-481
dialogue-483 dialogue-484 dialogue-485 dialogue-491 dialogue-493 dialogue-495 dialogue-497 dialogue-498
dialogue-499 dialogue-500 dialogue-501 dialogue-502 dialogue-503 dialogue-506 dialogue-509 dialogue-510
dialogue-511 dialogue-512 dialogue-513 dialogue-514 dialogue-515 dialogue-516 dialogue-519 dialogue-520
dialogue-521 dialogue-522 dialogue-525 dialogue-526 dialogue-527 dialogue-528 dialogue-529 dialogue-530
dialogue-532 dialogue-533 dialogue-540 dialogue-541 dialogue-542 dialogue-545 dialogue-546 dialogue-549
dialogue-550 dialogue-552 dialogue-556 dialogue-557 dialogue-558 dialogue-559 dialogue-560 dialogue-562
dialogue-563 dialogue-565 dialogue-569 dialogue-571 dialogue-574 dialogue-576 dialogue-577 dialogue-579
dialogue-580 dialogue-581 dialogue-582 dialogue-584 dialogue-585 dialogue-587 dialogue-589 dialogue-591
dialogue-592 dialogue-596 dialogue-597 dialogue-599
""".split())


FETCH = Source(
    "finedialfact", "FineDialFact (LREC 2026): HybriDialogue human-annotated atomic facts",
    f"https://github.com/{FINEDIALFACT}", "none stated (no licence file): research use",
    "no: no licence grants redistribution; fetch it instead (small test fixtures only)",
    repo_files(FINEDIALFACT, FINEDIALFACT_HEAD, "finedialfact", [
        ("README.md", "73a341122c9dd82984df814bf7ea09e9db8d410ea876c5930b0d599a8567566e"),
    ]) + (
        Remote("finedialfact/few_shot_examples.json",
               gh(FINEDIALFACT, FINEDIALFACT_HEAD, "few_shot/few_shot_examples.json"),
               "98bdc362f1994a84e85caafc351e2d15ac056cd09d572991a05db9506d04e145"),
        Remote("finedialfact/HybriDial/annotated_test_data.json",
               gh(FINEDIALFACT, FINEDIALFACT_HEAD, "data/HybriDial/annotated_test_data.json")),
    ),
    subsets=(Subset("finedialfact/hybridial_dev.json", "finedialfact/HybriDial/annotated_test_data.json",
                    DEV_KEYS, "id",
                    "db81dcbede7040a473611cd4c92ae52cefe363745521dd7021b32fa075d1cf1b",
                    "the project's dev split: 300 of the 500 annotated facts"),),
    note="The GPT-annotated data is on Google Drive (link in the README): not fetched.")

BENCHMARKS = (Benchmark("finedialfact", load_finedialfact, "FineDialFact JSON (claim level)",
                        path_keys=("finedialfact",)),)
