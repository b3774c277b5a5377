"""Rebuild ``begin_wow/`` and ``fade/``: the demo's BEGIN-WoW and FADE material, in their released formats.

* BEGIN, WoW part of the 2022 release (google/BEGIN-dataset ``wow/begin_dev_wow.tsv``, CC BY 4.0; LICENSE and
  NOTICE copied beside): 430 model responses, Fully attributable / Not fully attributable (no Generic row).
* FADE (souvikdgp16/FADE ``data/human_verified_500.csv``, MIT; LICENSE copied beside): 500 GPT-2 responses on
  OpenDialKG with human-verified hallucination tags (the scored text is the corrupted response, see
  ``data/fade.py``).

Rows whose reference (knowledge snippet / rendered path) is also that of a FaithDial turn of the demo
(``faithdial_balanced_sample.jsonl``, ``faithdial_models_*.jsonl``) or of a ``vista_human/dev.json`` turn are
left out, so neither the demo's test and validation nor the human dev set shares a reference with training.
Of the rest, split by dialogue with seed 0 (BEGIN: a (message, knowledge) pair; FADE: ``dialogue_id``):

* validation (``bench/demo_protocol.py val-turns``): BEGIN 30 + 30, FADE 20 + 20 rows (faithful + hallucinated);
* train (``vista-distill demo``, a training-only source): every other faithful row and as many hallucinated
  rows drawn with seed 1, so a constant answer scores 50%.

The rows are copied byte for byte (BEGIN) or re-quoted by ``csv`` (FADE), so the loaders read the released
formats. ``claims="response"`` (the loaders' option) makes each response its turn's one gold claim.

    python data/samples/build_begin_fade.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[2] / "shared" / "data"
VALIDATION = {"begin": 30, "fade": 20}   # rows per label


def _demo_references(data: Path) -> set[str]:
    from vista_distill.data.io import read_conversations
    from vista_distill.data.loading import normalise_text

    refs = set()
    for name in ("faithdial_balanced_sample.jsonl", "faithdial_models_train.jsonl",
                 "faithdial_models_validation.jsonl"):
        refs |= {normalise_text(t.reference) for c in read_conversations(HERE / name) for t in c.turns if t.reference}
    for conv in json.loads((data / "vista_human" / "dev.json").read_text()):
        refs |= {normalise_text(t.get("retrieved_document") or "") for t in conv}
    return refs - {""}


def _split(rows: list[tuple[str, bool]], per_label: int) -> tuple[list[int], list[int]]:
    """(validation, train) row indices: whole dialogues to validation until ``per_label`` rows of each label,
    then the train rows balanced by label."""
    dialogues: dict[str, list[int]] = {}
    for i, (did, _) in enumerate(rows):
        dialogues.setdefault(did, []).append(i)
    order = sorted(dialogues)
    random.Random(0).shuffle(order)
    val: list[int] = []
    count = {True: 0, False: 0}
    for did in order:
        add = {True: 0, False: 0}
        for i in dialogues[did]:
            add[rows[i][1]] += 1
        if all(count[k] + add[k] <= per_label for k in count):
            val += dialogues[did]
            for k in count:
                count[k] += add[k]
    taken = set(val)
    faithful = [i for i, (_, f) in enumerate(rows) if f and i not in taken]
    hallucinated = [i for i, (_, f) in enumerate(rows) if not f and i not in taken]
    n = min(len(faithful), len(hallucinated))
    rng = random.Random(1)
    train = sorted(rng.sample(faithful, n) + rng.sample(hallucinated, n))
    return sorted(val), train


def build_begin(src: Path, out: Path, exclude: set[str]) -> None:
    from vista_distill.data.loading import normalise_text, text_key

    lines = src.read_bytes().decode("utf-8").split("\r\n")
    header = lines[0].split("\t")
    k, m, lab = header.index("knowledge"), header.index("message"), header.index("begin_label")
    body = [ln for ln in lines[1:] if ln.strip()]
    cells = [ln.split("\t") for ln in body]
    keep = [i for i, c in enumerate(cells) if normalise_text(c[k]) not in exclude]
    rows = [(text_key(cells[i][m], cells[i][k]), cells[i][lab].strip().lower() == "fully attributable") for i in keep]
    val, train = _split(rows, VALIDATION["begin"])
    out.mkdir(parents=True, exist_ok=True)
    for split, idx in (("validation", val), ("train", train)):
        text = "\r\n".join([lines[0], *(body[keep[i]] for i in idx)]) + "\r\n"
        (out / f"begin_{split}_wow.tsv").write_bytes(text.encode("utf-8"))
        print(f"begin_wow/begin_{split}_wow.tsv: {len(idx)} rows "
              f"({sum(rows[i][1] for i in idx)} fully attributable)")
    print(f"  left out: {len(body) - len(keep)} rows sharing a reference with the demo's FaithDial or vista_human dev")
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(src.parent / name, out / name)


def build_fade(src: Path, out: Path, exclude: set[str]) -> None:
    from vista_distill.data.fade import render_paths
    from vista_distill.data.loading import normalise_text

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
    val, train = _split(rows, VALIDATION["fade"])
    out.mkdir(parents=True, exist_ok=True)
    for split, idx in (("validation", val), ("train", train)):
        with (out / f"{split}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(records[keep[i]] for i in idx)
        print(f"fade/{split}.csv: {len(idx)} rows ({sum(rows[i][1] for i in idx)} faithful)")
    print(f"  left out: {len(records) - len(keep)} rows sharing a reference with the demo's FaithDial or "
          "vista_human dev")
    shutil.copyfile(src.parent.parent / "LICENSE", out / "LICENSE")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DEFAULT), help="the shared data folder (begin/, fade/, vista_human/)")
    args = ap.parse_args()
    data = Path(args.data)
    exclude = _demo_references(data)
    build_begin(data / "begin" / "wow" / "begin_dev_wow.tsv", HERE / "begin_wow", exclude)
    build_fade(data / "fade" / "data" / "human_verified_500.csv", HERE / "fade", exclude)


if __name__ == "__main__":
    main()
