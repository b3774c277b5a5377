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
``claims="response+abstention"``: a clear abstention in the response ("I don't know ...", "I'm not sure ...") is
split off as its own ABSTENTION claim and the rest keeps the label (:func:`..loading.response_claims`).
Default ``"none"``: no claims.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..download.catalogue import Source, repo_files
from ..io import SchemaError
from ..loading import (
    AMBIGUOUS,
    DEFAULT_AMBIGUOUS,
    LabelTable,
    LoadResult,
    RowSink,
    UnknownLabel,
    exchange,
    merge_results,
    norm_label,
    normalise_text,
    read_delimited,
    resolve,
    response_claim,
    source_files,
    text_key,
    validate_claims_option,
    validate_options,
)
from ..schema import CONTRADICTED, FAITHFUL, HALLUCINATED, LACKING_EVIDENCE, OUT_OF_SCOPE, VERIFIED
from .entry import Benchmark
from .samples import SAMPLES, demo_references, split_by_dialogue

SAMPLE_VALIDATION_PER_LABEL = 30   # build_sample: validation rows per label
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
    validate_options(ambiguous, on_error)
    validate_claims_option(claims)
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
        if claims != "none":
            fallback = VERIFIED if gold == FAITHFUL else LACKING_EVIDENCE   # a label added through label_map
            response_claim(conv.turns[-1], CLAIM_LABELS.get(norm_label(original), fallback), claims)
        convs.append(conv)
        sink.ok()
    return sink.finish(convs)


def build_sample(data: Path, out: Path = SAMPLES) -> list[str]:
    """Rebuild ``begin_wow/`` under ``out``, the demo's BEGIN material, from the 2022 release's
    ``begin/wow/begin_dev_wow.tsv`` under ``data`` (CC BY 4.0; its LICENSE and NOTICE are copied beside): rows
    whose knowledge is also the reference of the demo's FaithDial material or of ``vista_human/dev.json`` left out,
    the rest split by (message, knowledge) pair (:func:`.samples.split_by_dialogue`): validation 30 + 30 rows, train
    every other fully attributable row and as many others. Rows are copied byte for byte. Returns what it wrote."""
    src = data / "begin" / "wow" / "begin_dev_wow.tsv"
    exclude = demo_references(data, out)
    lines = src.read_bytes().decode("utf-8").split("\r\n")
    header = lines[0].split("\t")
    k, m, lab = header.index("knowledge"), header.index("message"), header.index("begin_label")
    body = [ln for ln in lines[1:] if ln.strip()]
    cells = [ln.split("\t") for ln in body]
    keep = [i for i, c in enumerate(cells) if normalise_text(c[k]) not in exclude]
    rows = [(text_key(cells[i][m], cells[i][k]), cells[i][lab].strip().lower() == "fully attributable") for i in keep]
    val, train = split_by_dialogue(rows, SAMPLE_VALIDATION_PER_LABEL)
    folder = out / "begin_wow"
    folder.mkdir(parents=True, exist_ok=True)
    said = []
    for split, idx in (("validation", val), ("train", train)):
        text = "\r\n".join([lines[0], *(body[keep[i]] for i in idx)]) + "\r\n"
        (folder / f"begin_{split}_wow.tsv").write_bytes(text.encode("utf-8"))
        said.append(f"begin_wow/begin_{split}_wow.tsv: {len(idx)} rows ({sum(rows[i][1] for i in idx)} fully "
                    "attributable)")
    said.append(f"  left out: {len(body) - len(keep)} rows sharing a reference with the demo's FaithDial or "
                "vista_human dev")
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(src.parent / name, folder / name)
    return said


# What `vista-distill data fetch begin` downloads (the pinned commit and sha256s: data/download/catalogue.py)
BEGIN, BEGIN_HEAD, BEGIN_2021 = ("google/BEGIN-dataset", "6e65f0d5a1ed1b9574643a7640ff1678d4e979b5",
                                 "6f881995bca5405918f3138b04f29fdd2a1b73ae")

FETCH = Source(
    "begin", "BEGIN (Dziri et al., 2022), 2022 release dev TSVs and the 2021 release dev TSV",
    f"https://github.com/{BEGIN}",
    "CC BY 4.0 (wow/, cmu-dog/); CDLA-Sharing-1.0 (topicalchat/); see each folder's LICENSE and NOTICE",
    "yes, with the LICENSE and NOTICE files",
    repo_files(BEGIN, BEGIN_HEAD, "begin", [
        ("LICENSE", "cd97aa30978e6090d3af8fccd93c880da19889f52de065c256538479ae1a057f"),
        ("README.md", "1b01c90e6ac4ad2ac573b25cd7716f8e8dc6a7f4970c3ecc59275e30f00b539a"),
        ("wow/LICENSE", "5cae4a69c3c71bfec6251130e2a413bcaea051467f9805c2580dcf771a76361f"),
        ("wow/NOTICE", "3206f4c41ec756667ee8cd0300fd6114fc5bfb370799b46cdf9d3050fcc9a938"),
        ("wow/begin_dev_wow.tsv", "2ebfc95a1ff267e12dcce3250da4d158e1811c62e9e1a0d56f110efc9ace0178"),
        ("cmu-dog/LICENSE", "5cae4a69c3c71bfec6251130e2a413bcaea051467f9805c2580dcf771a76361f"),
        ("cmu-dog/NOTICE", "b8dcafc36b2f61facc33512c323e44b44da5c461e501ed580b3bc90ef23a9079"),
        ("cmu-dog/begin_dev_cmu.tsv", "9482294df23cf08a976773ca73203b84f7178534ecab1a206eaade365e97071c"),
        ("topicalchat/LICENSE", "94b1f359428afa5c7d1f3230e0cb4a5d51be6c9be12c2249e2b33e8fc489eba3"),
        ("topicalchat/NOTICE", "543150a8b878961db87ae6c4a4055c4b7199253eaafbbadb67558716a25aebd9"),
        ("topicalchat/begin_dev_tc.tsv", "d799a8cb3635de41b7f284dcfc872544ddeadcbae0c2ffd684270cce671f7711"),
    ]) + repo_files(BEGIN, BEGIN_2021, "begin", [
        ("README", "75c96810168e6b1ec1e5044834c4c236b1c2bed3a5510acf6c0f0b255a9e496a"),
        ("dev_05_24_21.tsv", "d4eb032eb23793238e1de5f5d534c1f9e675657e8f4f513a71a4a375f5cb7767"),
    ], under="first_release_2021/"),
    note=f"first_release_2021/ holds the 2021 release (commit {BEGIN_2021[:7]}), removed from the "
         "repository's tip later.")

BENCHMARKS = (Benchmark("begin", load_begin, "BEGIN TSV, 2022 (begin_label) or 2021 (5-way) release",
                        path_keys=("begin",), first_line_keys=("begin_label", "gold label")),)
