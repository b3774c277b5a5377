"""AIS (Rashkin et al., 2023) dialogue annotations joined to their sources
(https://github.com/google-research-datasets/AIS).

The annotation CSVs ``ann_wow.csv`` and ``ann_qrecc.csv`` hold model outputs and judgements but no
inputs: ``ex-idx`` (``conversation:turn``), ``doc-url`` (QReCC passage id), ``model-name``,
``output``, ``INT``, ``INT & AIS``, ``Flagged``, ``Q1``, ``Q2``, ``# agree (INT)``,
``# agree (AIS)``. History and grounding passage come from the sources, which are not on this
machine and are passed as paths:

* Wizard of Wikipedia ``test_random_split.json`` (``wow=``), from
  http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz:
  history = ``dialog[i]["text"]`` for i < turn, reference = ``dialog[turn]["checked_sentence"]``
  (rendered "title\\nsentence", like the VISTA authors' AIS turns).
* QReCC ``qrecc_test.json`` (``qrecc=``) and its passage collection (``qrecc_passages=``: a JSONL
  file, or a directory of them, with ``{"id", "contents"}`` records), from the SCAI QReCC 2022
  data https://github.com/scai-conf/SCAI-QReCC-21 / https://zenodo.org/record/5760304:
  history = ``Context`` + ``Question``, reference = the passage whose id is ``doc-url``.

Mapping: ``INT & AIS`` = 1 -> faithful; interpretable but not attributable -> hallucinated;
uninterpretable (``INT`` = 0) or flagged as a malformed task -> the ``ambiguous`` option
(default "hallucinated", which is what the dataset's own ``INT & AIS`` = 0 says).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..download.catalogue import Manual, Remote, Source, repo_files
from ..io import SchemaError
from ..loading import (
    AMBIGUOUS,
    DEFAULT_AMBIGUOUS,
    LabelTable,
    LoadResult,
    RowSink,
    UnknownLabel,
    merge_results,
    read_delimited,
    resolve,
    validate_options,
)
from ..schema import ASSISTANT, FAITHFUL, HALLUCINATED, USER, Conversation, Turn
from .entry import Benchmark

SOURCE = "AIS"
DOWNLOAD = "https://github.com/google-research-datasets/AIS (ann_wow.csv, ann_qrecc.csv)"
WOW_DOWNLOAD = ("test_random_split.json from http://parl.ai/downloads/wizard_of_wikipedia/"
                "wizard_of_wikipedia.tgz")
QRECC_DOWNLOAD = ("qrecc_test.json and the passage collection of the SCAI QReCC 2022 data "
                  "(https://github.com/scai-conf/SCAI-QReCC-21, https://zenodo.org/record/5760304)")
LABELS = {"attributable": FAITHFUL, "not attributable": HALLUCINATED, "uninterpretable": AMBIGUOUS,
          "flagged": AMBIGUOUS}
REQUIRED = ("ex-idx", "model-name", "output", "INT", "INT & AIS", "Flagged")
NOT_DIALOGUE = ("cnn", "totto")


def load_ais(source: str | os.PathLike, *, wow: str | os.PathLike | None = None,
             qrecc: str | os.PathLike | None = None, qrecc_passages: str | os.PathLike | None = None,
             split: str | None = None, ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise",
             label_map: Mapping[str, str] | None = None) -> LoadResult:
    """Load ``ann_wow.csv`` / ``ann_qrecc.csv`` (or both, from a directory) joined to their sources.

    ``split`` is accepted for a uniform interface: the AIS annotations have one (test) split.
    """
    validate_options(ambiguous, on_error)
    p = Path(source)
    if p.is_dir():
        files = [f for f in p.rglob("ann_*.csv") if not any(n in f.name for n in NOT_DIALOGUE)]
        if not files:
            raise FileNotFoundError(f"{p}: no ann_wow.csv / ann_qrecc.csv; the AIS annotations are published "
                                    f"at {DOWNLOAD}")
    elif p.is_file():
        files = [p]
    else:
        raise FileNotFoundError(f"{p}: no such file; the AIS annotations are published at {DOWNLOAD}")
    labels = LabelTable(LABELS, label_map)
    results = []
    for f in sorted(files):
        kind = _kind(f)
        if kind == "wow":
            if wow is None:
                raise ValueError(f"{f}: AIS WoW annotations need the Wizard of Wikipedia source (wow=PATH / "
                                 f"--wow PATH): {WOW_DOWNLOAD}")
            lookup = _WowLookup(Path(wow))
        else:
            if qrecc is None or qrecc_passages is None:
                raise ValueError(f"{f}: AIS QReCC annotations need qrecc=PATH and qrecc_passages=PATH "
                                 f"(--qrecc, --qrecc-passages): {QRECC_DOWNLOAD}")
            lookup = _QreccLookup(Path(qrecc), Path(qrecc_passages))
        results.append(_load_file(f, kind, lookup, labels, ambiguous, on_error))
    return merge_results(results, source, "ais")


def _kind(path: Path) -> str:
    name = path.name.lower()
    if any(n in name for n in NOT_DIALOGUE):
        raise SchemaError(path, "AIS CNN/DM and ToTTo annotations are not dialogue data; VISTA uses "
                                "ann_wow.csv and ann_qrecc.csv")
    if "wow" in name:
        return "wow"
    if "qrecc" in name:
        return "qrecc"
    raise SchemaError(path, "cannot tell the AIS source from the file name: expected 'wow' or 'qrecc' in it")


def _ex_idx(cell: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", cell or "")
    if not m:
        raise ValueError(f"expected 'conversation:turn', got {cell!r}")
    return int(m.group(1)), int(m.group(2))


class _WowLookup:
    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file; expected {WOW_DOWNLOAD}")
        try:
            self.data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise SchemaError(path, f"not valid JSON ({e.msg})") from e
        if not isinstance(self.data, list):
            raise SchemaError(path, "expected the Wizard of Wikipedia JSON list of dialogues")
        self.path = path

    def __call__(self, conv: int, turn: int, doc_url: str) -> tuple[list[Turn], str]:
        if conv >= len(self.data):
            raise LookupError(f"conversation {conv} not in {self.path} ({len(self.data)} dialogues)")
        dialog = self.data[conv].get("dialog") or []
        if turn >= len(dialog):
            raise LookupError(f"turn {turn} not in conversation {conv} of {self.path} ({len(dialog)} turns)")
        target = dialog[turn]
        if "wizard" not in str(target.get("speaker", "")).lower():
            raise LookupError(f"turn {conv}:{turn} of {self.path} is spoken by {target.get('speaker')!r}, "
                              "not the wizard")
        history = [Turn(ASSISTANT if "wizard" in str(d.get("speaker", "")).lower() else USER, d["text"])
                   for d in dialog[:turn]]
        return history, _checked_sentence(target)


def _checked_sentence(turn: dict[str, Any]) -> str:
    """``{"chosen_Title_3": "sentence"}`` -> ``"Title\\nsentence"`` ("" when no passage was used)."""
    checked = turn.get("checked_sentence") or {}
    if not isinstance(checked, dict):
        raise LookupError(f"checked_sentence is a {type(checked).__name__}, expected an object")
    key, sentence = next(iter(checked.items()), ("no_passages_used", "no_passages_used"))
    if key == "no_passages_used" or sentence == "no_passages_used":
        return ""
    titles = [t for t in (turn.get("checked_passage") or {}).values() if t and t != "no_passages_used"]
    title = titles[0] if titles else re.sub(r"^(chosen|partner|self)_|_\d+$", "", key)
    return f"{title}\n{sentence}"


class _QreccLookup:
    def __init__(self, path: Path, passages: Path) -> None:
        for p, what in ((path, "qrecc_test.json"), (passages, "passage collection")):
            if not p.exists():
                raise FileNotFoundError(f"{p}: no such file; expected the QReCC {what}: {QRECC_DOWNLOAD}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise SchemaError(path, f"not valid JSON ({e.msg})") from e
        try:
            self.turns = {(int(d["Conversation_no"]), int(d["Turn_no"])): d for d in data}
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(path, f"not the QReCC turn list (Conversation_no / Turn_no): {e!r}") from e
        self.passages_path, self.passages, self.path = passages, None, path
        self.wanted: set[str] = set()

    def want(self, doc_url: str) -> None:
        self.wanted.add(doc_url)

    def _load_passages(self) -> None:
        # The full collection is tens of GB: stream it and keep only the passages asked for.
        p = self.passages_path
        files = [p] if p.is_file() else sorted(p.rglob("*.jsonl"))
        self.passages = {}
        id_re = re.compile(r'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')
        for f in files:
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    m = id_re.search(line)
                    if m and json.loads(f'"{m.group(1)}"') in self.wanted:
                        rec = json.loads(line)
                        self.passages[rec["id"]] = rec.get("contents", "")

    def __call__(self, conv: int, turn: int, doc_url: str) -> tuple[list[Turn], str]:
        if self.passages is None:
            self._load_passages()
        d = self.turns.get((conv, turn))
        if d is None:
            raise LookupError(f"conversation {conv} turn {turn} not in {self.path}")
        if doc_url not in self.passages:
            raise LookupError(f"passage {doc_url!r} not in {self.passages_path}")
        context = list(d.get("Context") or [])
        history = [Turn(USER if (len(context) - k) % 2 == 0 else ASSISTANT, t) for k, t in enumerate(context)]
        history.append(Turn(USER, d["Question"]))
        return history, self.passages[doc_url]


def _load_file(path: Path, kind: str, lookup, labels: LabelTable, ambiguous: str,
               on_error: str) -> LoadResult:
    header, rows = read_delimited(path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SchemaError(path, f"not an AIS annotation CSV: lacks columns {missing}; see {DOWNLOAD}")
    rows = list(rows)
    if kind == "qrecc":
        for _, _, rec, _ in rows:
            lookup.want((rec.get("doc-url") or "").strip())
    sink = RowSink(path, "ais", on_error)
    convs = []
    for i, line, rec, extra in rows:
        sink.read()
        if extra:
            sink.malformed(i, f"{len(extra)} cells more than the header", line=line)
            continue
        try:
            conv_no, turn_no = _ex_idx(rec.get("ex-idx") or "")
        except ValueError as e:
            sink.malformed(i, str(e), "ex-idx", line)
            continue
        if not (rec.get("output") or "").strip():
            sink.malformed(i, "empty", "output", line)
            continue
        try:
            flags = {c: int((rec.get(c) or "").strip()) for c in ("INT", "INT & AIS", "Flagged")}
        except ValueError:
            bad = next(c for c in ("INT", "INT & AIS", "Flagged") if not (rec.get(c) or "").strip().isdigit())
            sink.malformed(i, f"expected 0 or 1, got {rec.get(bad)!r}", bad, line)
            continue
        if flags["Flagged"]:
            original = "flagged"
        elif not flags["INT"]:
            original = "uninterpretable"
        else:
            original = "attributable" if flags["INT & AIS"] else "not attributable"
        try:
            gold = resolve(labels.classify([original]), ambiguous)
        except UnknownLabel as e:
            sink.malformed(i, str(e), "INT & AIS", line)
            continue
        if gold is None:
            sink.drop(i, f"ambiguous label (ambiguous='drop') -- {original}")
            continue
        try:
            history, reference = lookup(conv_no, turn_no, (rec.get("doc-url") or "").strip())
        except (LookupError, TypeError, AttributeError) as e:  # KeyError too: a source entry's shape
            why = str(e) if type(e) is LookupError else repr(e)
            sink.malformed(i, f"no source for ex-idx {rec['ex-idx'].strip()}: {why}", "ex-idx", line)
            continue
        turn = Turn(ASSISTANT, rec["output"], reference=reference, gold_label=gold,
                    meta={"original_label": original, **flags, "model": rec.get("model-name"),
                          "q1": rec.get("Q1"), "q2": rec.get("Q2"),
                          "agree_int": rec.get("# agree (INT)"), "agree_ais": rec.get("# agree (AIS)")})
        convs.append(Conversation(
            id=f"{SOURCE}-{kind}-{i}", source=SOURCE, turns=[*history, turn],
            meta={"benchmark": "ais", "subset": kind, "file": path.name, "row": i,
                  "ex_idx": rec["ex-idx"].strip(), "dialogue_id": f"{kind}:{conv_no}"}))
        sink.ok()
    return sink.finish(convs)


# What `vista-distill data fetch ais` downloads (the pinned commit and sha256s: data/download/catalogue.py)
AIS, AIS_HEAD = "google-research-datasets/AIS", "df55dc416715e7cec8e8d2e091d1806d379f1a8d"
WOW_TGZ = "http://parl.ai/downloads/wizard_of_wikipedia/wizard_of_wikipedia.tgz"
WOW_TGZ_SHA256 = "2a549627a83fea745efa2076a41d1c0078ad002ab2b54eae6a4e3d3d66ae24b7"  # ParlAI's build.py

FETCH = Source(
    "ais", "AIS (Rashkin et al., 2023): WoW and QReCC annotations, with the WoW source",
    f"https://github.com/{AIS}",
    "not stated in the files fetched here (see the repository); WoW: CC BY 4.0 (ParlAI); "
    "QReCC: CC BY-SA 3.0",
    "no: the annotations' licence is not established here; fetch them instead",
    repo_files(AIS, AIS_HEAD, "ais", [("README.md", None), ("ann_wow.csv", None), ("ann_qrecc.csv", None)])
    + (Remote("ais/wow/test_random_split.json", WOW_TGZ, member="test_random_split.json",
              archive_sha256=WOW_TGZ_SHA256),),
    manual=(Manual("ais/qrecc/qrecc_test.json",
                   "QReCC test turns of the SCAI QReCC 2022 data: https://zenodo.org/record/5760304 "
                   "(see https://github.com/scai-conf/SCAI-QReCC-21#data); no stable file URL is "
                   "established here"),
            Manual("ais/qrecc/passages/",
                   "the QReCC passage collection as JSONL {\"id\", \"contents\"} files (tens of GB): "
                   "https://zenodo.org/record/5760304 and https://github.com/apple/ml-qrecc/tree/main/"
                   "collection")),
    note="`data prepare --benchmark ais --source DIR/ais/ann_wow.csv --wow "
         "DIR/ais/wow/test_random_split.json` needs only the automatic files.")

BENCHMARKS = (Benchmark("ais", load_ais, "AIS ann_wow.csv / ann_qrecc.csv joined to WoW / QReCC",
                        file_patterns=("ann_*.csv",), first_line_keys=("ex-idx",)),)
