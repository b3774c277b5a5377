"""FADE (Das et al., 2022) in its released CSV format (https://github.com/souvikdgp16/FADE).

Files: ``data/human_verified_500.csv`` and the splits ``data/mixed/{train,dev,test}_{observed,
balanced,extrinsic_plus,intrinsic_plus}.csv`` (the VISTA paper uses the *observed* test split; it
is not in the public snapshot, so pass a path to it). Columns: ``history`` (Python list literal),
``response``, ``speaker``, ``knowledge_base`` (``{'paths': [[s, r, o], ...], 'render': str}``),
``dialogue_id``, ``hallucination_tags`` (BILOU tags over the scored response, e.g. ``B-HALLUC``),
and for synthetic corruptions ``corrupted_response`` plus entity/relation details.

Label: any ``*-HALLUC`` tag -> hallucinated, else faithful (no ambiguous labels). Reference: the
knowledge-graph path's ``render`` text (rendered from ``paths`` when it is missing).

Scored text (``text``): the tags describe ``corrupted_response`` wherever a row was corrupted, and
the corruption lower-cases the whole response. ``"auto"`` (default) therefore scores
``corrupted_response`` for every row of a file that contains any real corruption, so that case
never gives the label away, and ``response`` for files of observed hallucinations.

Claims (``claims="response"``): FADE tags spans of a response, and its responses are short single
utterances, so the scored text can serve as the turn's one gold claim: VERIFIED where no span is tagged,
LACKING EVIDENCE where one is (an entity or relation the knowledge path does not support).
``claims="response+abstention"``: a clear abstention in the response ("I don't know ...", "I'm not sure ...")
is split off as its own ABSTENTION claim and the rest keeps the label (:func:`..loading.response_claims`).
Default ``"none"``: no claims.

Rows of one ``dialogue_id`` are packed into as few conversations as possible (the paper scores
several turns per dialogue); two rows that score the same position, or whose histories
disagree, go to separate conversations that share ``meta["dialogue_id"]``. Roles are relative to
the scored speaker: its responses are the assistant turns (``speakers="all"``, the original
speaker is kept in the turn's meta); ``speakers="assistant"`` drops rows spoken by the user.
"""

from __future__ import annotations

import ast
import csv
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..download.catalogue import Manual, Source, repo_files
from ..io import SchemaError
from ..loading import (
    DEFAULT_AMBIGUOUS,
    LoadResult,
    RowSink,
    context_turns,
    merge_results,
    normalise_text,
    read_delimited,
    response_claim,
    source_files,
    validate_claims_option,
    validate_options,
)
from ..schema import ASSISTANT, FAITHFUL, HALLUCINATED, LACKING_EVIDENCE, VERIFIED, Conversation, Turn
from .entry import Benchmark
from .samples import SAMPLES, demo_references, split_by_dialogue

SAMPLE_VALIDATION_PER_LABEL = 20   # build_sample: validation rows per label
SOURCE = "FADE"
DOWNLOAD = ("https://github.com/souvikdgp16/FADE (data/mixed/test_observed.csv for the paper's observed "
            "split, commit e14277a; data/human_verified_500.csv)")
REQUIRED = ("history", "response", "speaker", "knowledge_base", "dialogue_id", "hallucination_tags")
TEXT_CHOICES = ("auto", "corrupted", "response")
SPEAKER_CHOICES = ("all", "assistant")
SPLIT_PATTERNS = ("**/{split}_observed.csv", "**/{split}.csv")
_TAG = re.compile(r"^(O|[BILU]-[A-Za-z_]+)$")


@dataclass
class _Row:
    i: int
    dialogue_id: str
    speaker: str
    history: list[str]
    response: str
    corrupted: str | None
    reference: str
    gold: str
    meta: dict[str, Any]


@dataclass
class _Variant:
    speaker: str
    context: dict[int, str] = field(default_factory=dict)  # position -> original text
    scored: dict[int, _Row] = field(default_factory=dict)

    def fits(self, r: _Row) -> bool:
        pos = len(r.history)
        # Same speaker, a free position, and the same parity so every scored turn is an assistant turn.
        if r.speaker != self.speaker or pos in self.scored or any((pos - q) % 2 for q in self.scored):
            return False
        texts = {**dict(enumerate(r.history)), pos: r.response}
        return all(normalise_text(self.context[p]) == normalise_text(t)
                   for p, t in texts.items() if p in self.context)

    def add(self, r: _Row) -> None:
        for p, t in enumerate(r.history):
            self.context.setdefault(p, t)
        self.context.setdefault(len(r.history), r.response)
        self.scored[len(r.history)] = r


def load_fade(source: str | os.PathLike, *, split: str | None = None, ambiguous: str = DEFAULT_AMBIGUOUS,
              on_error: str = "raise", text: str = "auto", speakers: str = "all", claims: str = "none") -> LoadResult:
    """Load a FADE CSV (or ``{split}_observed.csv`` under a directory). ``ambiguous`` is accepted
    for a uniform interface; FADE's tags have no ambiguous value. ``claims="response"``: the scored
    text is the turn's one gold claim."""
    validate_options(ambiguous, on_error)
    validate_claims_option(claims)
    if text not in TEXT_CHOICES:
        raise ValueError(f"text must be one of {TEXT_CHOICES}, got {text!r}")
    if speakers not in SPEAKER_CHOICES:
        raise ValueError(f"speakers must be one of {SPEAKER_CHOICES}, got {speakers!r}")
    files = source_files(source, split, SPLIT_PATTERNS, "FADE CSV", download=DOWNLOAD)
    return merge_results([_load_file(f, on_error, text, speakers, claims) for f in files], source, "fade")


def _literal(cell: str, kind: type) -> Any:
    value = ast.literal_eval(cell)
    if not isinstance(value, kind):
        raise ValueError(f"expected a {kind.__name__} literal, got {type(value).__name__}")
    return value


def render_paths(paths: list) -> str:
    """``[[s, r, o], ...]`` -> ``"s : `r`: o. ..."`` (the format of FADE's own renders)."""
    return ". ".join(" : ".join([str(p[0]), f"`{p[1]}`"]) + f": {p[2]}" for p in paths if len(p) == 3)


def _load_file(path: Path, on_error: str, text: str, speakers: str, claims: str) -> LoadResult:
    header, rows = read_delimited(path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SchemaError(path, f"not a FADE CSV: lacks columns {missing}; FADE is published at {DOWNLOAD}")
    sink = RowSink(path, "fade", on_error)
    parsed: list[_Row] = []
    for i, line, rec, extra in rows:
        sink.read()
        r = _parse(i, line, rec, extra, sink)
        if r is not None:
            parsed.append(r)

    corrupted_file = any(r.corrupted and " ".join(r.corrupted.split()) != " ".join(r.response.lower().split())
                         for r in parsed)
    use_corrupted = text == "corrupted" or (text == "auto" and corrupted_file)
    if text == "response" and corrupted_file:
        sink.report.notes.append(f"{path.name}: text='response' on a file with corruptions: the tags "
                                 "describe corrupted_response, so corrupted rows keep a label their text "
                                 "does not earn")
    if text == "auto":
        sink.report.notes.append(f"{path.name}: scored text = "
                                 f"{'corrupted_response' if use_corrupted else 'response'} (text='auto')")

    variants: dict[str, list[_Variant]] = {}
    for r in parsed:
        if speakers == "assistant" and r.speaker != ASSISTANT:
            sink.drop(r.i, f"response spoken by the {r.speaker} (speakers='assistant')")
            continue
        if use_corrupted and not r.corrupted:
            sink.malformed(r.i, "empty, but this file's responses are scored as corrupted_response",
                           "corrupted_response")
            continue
        vs = variants.setdefault(r.dialogue_id, [])
        v = next((v for v in vs if v.fits(r)), None)
        if v is None:
            v = _Variant(r.speaker)
            vs.append(v)
        v.add(r)
        sink.ok()

    convs = []
    for did, vs in variants.items():
        for k, v in enumerate(vs):
            n = max(v.context) + 1
            turns = context_turns([v.context[p] for p in range(n - 1)]) + [Turn(ASSISTANT, v.context[n - 1])]
            for pos, r in v.scored.items():
                turns[pos] = Turn(ASSISTANT, r.corrupted if use_corrupted else r.response,
                                  reference=r.reference, gold_label=r.gold,
                                  meta={**r.meta, "speaker": r.speaker})
                if claims != "none":
                    response_claim(turns[pos], VERIFIED if r.gold == FAITHFUL else LACKING_EVIDENCE, claims)
            cid = f"{SOURCE}-{did}" if len(vs) == 1 else f"{SOURCE}-{did}.{k + 1}"
            convs.append(Conversation(id=cid, source=SOURCE, turns=turns,
                                      meta={"benchmark": "fade", "file": path.name, "dialogue_id": did,
                                            "rows": sorted(r.i for r in v.scored.values())}))
    return sink.finish(convs)


def _parse(i: int, line: int, rec: dict, extra, sink: RowSink) -> _Row | None:
    if extra:
        sink.malformed(i, f"{len(extra)} cells more than the header", line=line)
        return None
    bad = next((c for c in REQUIRED if rec.get(c) is None or not rec[c].strip()), None)
    if bad:
        sink.malformed(i, "empty" if rec.get(bad) is not None else "missing", bad, line)
        return None
    try:
        history = _literal(rec["history"], list)
        if not all(isinstance(h, str) for h in history):
            raise ValueError("expected a list of strings")
    except (ValueError, SyntaxError) as e:
        sink.malformed(i, f"not a Python list of utterances ({e})", "history", line)
        return None
    try:
        kb = _literal(rec["knowledge_base"], dict)
        paths = kb.get("paths") or []
        reference = kb.get("render") or render_paths(paths)
        if not isinstance(reference, str) or not reference.strip():
            raise ValueError("no 'render' text and no paths to render")
    except (ValueError, SyntaxError, TypeError, IndexError) as e:
        sink.malformed(i, f"not a knowledge-base literal ({e})", "knowledge_base", line)
        return None
    try:
        tags = _literal(rec["hallucination_tags"], list)
        bad_tag = next((t for t in tags if not isinstance(t, str) or not _TAG.match(t)), None)
        if bad_tag is not None or not tags:
            raise ValueError(f"not a BILOU tag: {bad_tag!r}" if tags else "no tags")
    except (ValueError, SyntaxError) as e:
        sink.malformed(i, f"not a list of BILOU tags ({e})", "hallucination_tags", line)
        return None
    speaker = rec["speaker"].strip().lower()
    if speaker not in ("user", "assistant"):
        sink.malformed(i, f"expected 'user' or 'assistant', got {rec['speaker']!r}", "speaker", line)
        return None
    n_spans = sum(t.startswith(("B-", "U-")) and t.upper().endswith("HALLUC") for t in tags)
    halluc = any(t.upper().endswith("-HALLUC") for t in tags)
    meta: dict[str, Any] = {"original_label": "HALLUC" if halluc else "O", "hallucination_spans": n_spans,
                            "hallucination_tags": tags, "kg_paths": paths, "row": i}
    for key in ("corrupt_entity", "original_entity", "corrupt_relation"):
        if rec.get(key):
            meta[key] = rec[key]
    return _Row(i, rec["dialogue_id"].strip(), speaker, history, rec["response"],
                (rec.get("corrupted_response") or "").strip() or None, reference,
                HALLUCINATED if halluc else FAITHFUL, meta)


def build_sample(data: Path, out: Path = SAMPLES) -> list[str]:
    """Rebuild ``fade/`` under ``out``, the demo's FADE material, from ``fade/data/human_verified_500.csv`` under
    ``data`` (MIT; its LICENSE is copied beside): rows whose reference is also that of the demo's FaithDial
    material or of ``vista_human/dev.json`` left out, the rest split by ``dialogue_id``
    (:func:`.samples.split_by_dialogue`): validation 20 + 20 rows, train every other faithful row and as many
    hallucinated ones. Rows are re-quoted by ``csv``. Returns what it wrote."""
    src = data / "fade" / "data" / "human_verified_500.csv"
    exclude = demo_references(data, out)
    with src.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        records = list(reader)
    col = {name: header.index(name) for name in ("knowledge_base", "dialogue_id", "hallucination_tags")}

    def reference(rec: list[str]) -> str:
        kb = ast.literal_eval(rec[col["knowledge_base"]])
        return kb.get("render") or render_paths(kb.get("paths") or [])

    keep = [i for i, r in enumerate(records) if normalise_text(reference(r)) not in exclude]
    rows = [(records[i][col["dialogue_id"]].strip(),
             not any(t.upper().endswith("-HALLUC") for t in ast.literal_eval(records[i][col["hallucination_tags"]])))
            for i in keep]
    val, train = split_by_dialogue(rows, SAMPLE_VALIDATION_PER_LABEL)
    folder = out / "fade"
    folder.mkdir(parents=True, exist_ok=True)
    said = []
    for split, idx in (("validation", val), ("train", train)):
        with (folder / f"{split}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(records[keep[i]] for i in idx)
        said.append(f"fade/{split}.csv: {len(idx)} rows ({sum(rows[i][1] for i in idx)} faithful)")
    said.append(f"  left out: {len(records) - len(keep)} rows sharing a reference with the demo's FaithDial or "
                "vista_human dev")
    shutil.copyfile(src.parent.parent / "LICENSE", folder / "LICENSE")
    return said


# What `vista-distill data fetch fade` downloads (the pinned commit and sha256s: data/download/catalogue.py)
FADE, FADE_HEAD = "souvikdgp16/FADE", "db581a1b677de1626da713a1fb2417d8507c16f1"

FETCH = Source(
    "fade", "FADE (Das et al., 2022): the human-verified set", f"https://github.com/{FADE}", "MIT",
    "yes, with LICENSE",
    repo_files(FADE, FADE_HEAD, "fade", [
        ("LICENSE", "ea2cf01c03494ea9c58c7ce0b25a318e881f619462854ba00510de960bb9ad89"),
        ("README.md", "c43030da006815f5ae31f207e89d02f5e4d3089d09dbf18e040f5e0c7ac3338b"),
        ("data/human_verified_500.csv", "7a4d7d14ee1efe84b24c08732ab73f6598d3b5fc632a0c1a3464ce6cb09ea5e7"),
    ]),
    manual=(Manual("fade/data/mixed/", "FADE's train / dev / test splits (data/mixed/*.csv, added in "
                                       "commit e14277a 'added datasets v1') could not be obtained when "
                                       "this entry was written: see the repository's history or ask the "
                                       "authors"),))

BENCHMARKS = (Benchmark("fade", load_fade, "FADE CSV with BILOU hallucination tags", path_keys=("fade",),
                        first_line_keys=("hallucination_tags",)),)
