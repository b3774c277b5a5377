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

from ..download.catalogue import Remote, Source, Subset, gh
from ..loading import DEFAULT_AMBIGUOUS, LoadResult, RowSink, merge_results, source_files, validate_options
from ..schema import ASSISTANT, FAITHFUL, HALLUCINATED, USER, Conversation, Turn
from .entry import Benchmark

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
    validate_options(ambiguous, on_error)
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


# What `vista-distill data fetch fhsumbench` downloads (the pinned commit and sha256s: data/download/catalogue.py)
FHSUM, FHSUM_DATA = "cece00/FHSumBench", "af1441c56e6fbdb6fdd22ff8f649af86d93be905"


# ``id`` of the rows in fhsumbench/dev.json, in order.
DEV_KEYS = tuple(int(i) for i in ("""
0 8 20 21 27 29 31 33 43 49 50 51 53 68 70 78 83 86 89 90 101 103 104 109 110 114 117 118 120 123 125
129 130 133 138 144 145 147 148 150 153 154 155 157 161 162 164 165 167 172 175 177 179 183 185 189 192
193 195 198 204 205 214 215 219 220 230 231 232 233 234 235 236 237 239 242 243 244 245 247 248 264 265
266 273 279 281 287 292 298 300 308 314 317 318 323 324 328 330 331 332 341 344 347 354 357 358 360 361
383 387 392 396 400 401 403 404 407 410 411 413 414 416 418 422 425 426 436 438 439 451 452 461 463 468
472 477 478 479 485 489 492 494 495 496 501 502 504 507 510 514 517 520 522 528 530 533 535 537 539 541
546 547 550 552 554 562 563 569 571 572 577 578 580 585 591 592 593 602 607 610 616 621 624 625 637 642
643 644 648 649 650 653 656 660 661 662 667 668 671 672 676 680 687 688 690 695 697 705 706 707 708 709
711 713 714 715 716 720 723 724 733 734 739 742 743 745 749 753 759 766 767 768 771 773 788 793 798 799
805 809 812 814 817 825 829 831 835 844 845 848 849 852 853 857 859 861 863 873 877 882 888 890 891 893
894 897 900 901 902 906 911 916 919 920 925 928 929 930 931 932 934 945 949 963 964 966 970 971 972 982
983 984 986 990 992 1001 1003 1006 1007 1008 1010 1022 1023 1028 1030 1031 1032 1034 1037 1039 1044 1049
1053 1054 1057 1059 1064 1065 1075 1079 1081 1090 1093 1095 1096 1097 1102 1107 1109 1113 1115 1120 1128
1131 1135 1136 1138 1139 1142 1146 1148 1149 1155 1159 1163 1165 1167 1169 1170 1175 1176 1180 1181 1184
1185 1190 1192 1201 1203 1211 1213 1215 1219 1220 1225 1226 1236 1239 1243 1246 1249 1253 1256 1257 1263
1265 1266 1267 1270 1281 1283 1287 1288 1289 1290 1291 1293 1296 1297 1302 1306 1310 1313 1315 1319 1323
1324 1325 1326 1329
""".split()))


FETCH = Source(
    "fhsumbench", "FHSumBench (mixed-context hallucination in summarisation, Findings of ACL 2025)",
    f"https://github.com/{FHSUM}", "none (no licence file)",
    "never: no licence; measurement only, not even excerpts",
    (Remote("fhsumbench/FHSumBench_data.json", gh(FHSUM, FHSUM_DATA, "FHSumBench_data.json")),),
    subsets=(Subset("fhsumbench/dev.json", "fhsumbench/FHSumBench_data.json",
                    DEV_KEYS, "id",
                    "dcd2ce3c7533ef4c9b5b6320f9c83d17ae1d6e451a0209d6c4d03c851de95e7e",
                    "the project's dev split: 401 of 1,336 rows"),),
    note=f"The file was removed from the repository's tip (commit 48d74f8 'hide_data'); it is taken "
         f"from commit {FHSUM_DATA[:7]}.",
    warning="fhsumbench has no licence: use it for measurement only and never commit any of it "
            "(not to the project, not to a fork)")

BENCHMARKS = (Benchmark("fhsumbench", load_fhsumbench,
                        "FHSumBench JSON: news summaries, faithful / factual / non-factual hallucination "
                        "(measurement only)", path_keys=("fhsumbench",)),)
