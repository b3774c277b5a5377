"""FaithDial (Dziri et al., 2022a): the Hub corpus and the data-audit CSVs.

Corpus: the Hugging Face dataset ``McGill-NLP/FaithDial`` (``datasets.load_dataset``; splits
train / validation / test / {valid,test}_{random,topic}_split). One example per wizard turn with
``dialog_idx``, ``history``, ``knowledge``, ``response`` (FaithDial's edited response),
``original_response`` (the unedited Wizard-of-Wikipedia response, when it was edited) and
``BEGIN`` / ``VRM`` label lists, which describe the *original* response. The VISTA paper scores
the unedited corpus, so by default each wizard turn's text is ``original_response`` (falling back
to ``response`` when the turn was not edited) and the turn is labelled from ``BEGIN``. Also read
from a local copy: a directory saved with ``save_to_disk``, the Hub repository's
``data/{train,valid,test}.json`` (the nested ``[{"utterances": [...]}]`` format of the GitHub
README), or JSON/JSONL with one example per row.

Data-audit CSVs (https://github.com/McGill-NLP/FaithDial/tree/main/data-audit):
``gold/{wow,cmu,topical}.csv`` (evidence, history, response, BEGIN, VRM) and
``{CTRL,DoHA,GPT2}/*_processed_*.csv`` (knowledge, history, <model>, begin_label, vrm_label,
where begin_label may combine labels: ``entailment,hallucination``).

Mapping (any hallucinated label wins, then ambiguous): Entailment -> faithful; Hallucination,
Partial Hallucination -> hallucinated (part of the response is unsupported, which makes the turn
UNVERIFIABLE under the paper's rule); Generic, Uncooperative -> the ``ambiguous`` option.

Claims (data-audit CSVs, ``claims="response"``): the response as is is the turn's one gold claim, from its BEGIN
label: any Hallucination / Partial Hallucination -> LACKING EVIDENCE, contradiction -> CONTRADICTED, else Generic ->
OUT-OF-SCOPE (a vague or purely conversational response: questions, acknowledgements, small talk; nothing to
verify), else Entailment -> VERIFIED (``entailment,uncooperative`` too: the content is entailed, the response only
ignores the user); Uncooperative alone gets no claim (it says nothing about the content: of the gold files' 20 such
responses none abstains, most state knowledge off the user's point). ``claims="response+abstention"``: a clear
abstention ("I don't know ...", "I'm not sure ...") is split off as an ABSTENTION claim
(:func:`~vista_distill.data.loading.response_claims`). Default ``"none"``: no claims.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...download.catalogue import Remote, Source, hub_url, repo_files
from ...io import SchemaError
from ...loading import (
    AMBIGUOUS,
    BLANK,
    DEFAULT_AMBIGUOUS,
    LabelTable,
    LoadResult,
    RowSink,
    UnknownLabel,
    context_turns,
    exchange,
    merge_results,
    read_delimited,
    resolve,
    response_claim,
    source_files,
    split_labels,
    text_key,
    validate_claims_option,
    validate_options,
)
from ...schema import (
    ASSISTANT,
    CONTRADICTED,
    FAITHFUL,
    HALLUCINATED,
    LACKING_EVIDENCE,
    OUT_OF_SCOPE,
    VERIFIED,
    Conversation,
    Turn,
)
from ..entry import Benchmark

SOURCE = "FaithDial"
HUB_ID = "McGill-NLP/FaithDial"
DOWNLOAD = (f"the Hugging Face dataset {HUB_ID} (datasets.load_dataset('{HUB_ID}', split='test'), "
            "files at https://huggingface.co/datasets/McGill-NLP/FaithDial/tree/main/data)")
AUDIT_DOWNLOAD = "https://github.com/McGill-NLP/FaithDial/tree/main/data-audit"

LABELS = {"entailment": FAITHFUL, "hallucination": HALLUCINATED, "partial hallucination": HALLUCINATED,
          "contradiction": HALLUCINATED, "generic": AMBIGUOUS, "uncooperative": AMBIGUOUS}
# Typos in the released per-model audit files.
ALIASES = {"entailmentt": "entailment", "hallucinated": "hallucination"}
RESPONSES = ("original", "edited")
# Hub split names -> file names in the Hub repository's data/ folder.
SPLIT_FILES = {"validation": "valid", "valid": "valid"}


def load_faithdial(source: str | os.PathLike = HUB_ID, *, split: str | None = None,
                   ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise",
                   label_map: Mapping[str, str] | None = None, responses: str = "original") -> LoadResult:
    """Load FaithDial from the Hub id, a local copy of the corpus, or data-audit CSV(s).

    ``responses="edited"`` scores FaithDial's edited responses instead; BEGIN labels describe the
    original responses, so those turns carry no gold label.
    """
    validate_options(ambiguous, on_error)
    if responses not in RESPONSES:
        raise ValueError(f"responses must be one of {RESPONSES}, got {responses!r}")
    p = Path(source)
    if (p.is_file() and p.suffix == ".csv") or (p.is_dir() and not _is_corpus_dir(p)):
        return load_faithdial_audit(p, ambiguous=ambiguous, on_error=on_error, label_map=label_map)
    labels = LabelTable(LABELS, label_map, ALIASES)
    if not p.exists():
        if str(source).count("/") != 1:
            raise FileNotFoundError(f"{source}: no such file or directory; FaithDial comes from {DOWNLOAD}")
        rows, where = _hub_rows(str(source), split or "test"), f"{source}[{split or 'test'}]"
    elif p.is_dir() and ((p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists()):
        rows, where = _disk_rows(p, split or "test"), str(p)
    else:
        if p.is_dir():
            name = SPLIT_FILES.get(split or "test", split or "test")
            p = source_files(p, name, ("{split}.json", "{split}.jsonl", "data/{split}.json"), "FaithDial")[0]
        rows, where = _file_rows(p), str(p)
    return _build(rows, where, labels, ambiguous, on_error, responses)


def _is_corpus_dir(p: Path) -> bool:
    return any((p / n).exists() for n in ("dataset_info.json", "dataset_dict.json", "data")) or any(
        p.glob("*.json")) or any(p.glob("*.jsonl"))


def _hub_rows(hub_id: str, split: str) -> Iterable[tuple[int, Any]]:
    try:
        from datasets import load_dataset

        ds = load_dataset(hub_id, split=split)
    except Exception as e:  # offline, unknown split, ...: say where the data lives
        raise RuntimeError(f"could not load {hub_id} split {split!r} from the Hub ({type(e).__name__}: {e}); "
                           f"download {DOWNLOAD} and pass a local path instead") from e
    return enumerate(ds, start=1)


def _disk_rows(p: Path, split: str) -> Iterable[tuple[int, Any]]:
    from datasets import DatasetDict, load_from_disk

    ds = load_from_disk(str(p))
    if isinstance(ds, DatasetDict):
        if split not in ds:
            raise ValueError(f"{p}: no split {split!r}; has {list(ds)}")
        ds = ds[split]
    return enumerate(ds, start=1)


def _file_rows(p: Path) -> Iterable[tuple[int, Any]]:
    """Flat examples from a JSON list, JSONL, or the nested ``{"utterances": [...]}`` format.

    Nested dialogues are numbered by their position in the file and keep that as ``dialog_idx``
    when it is missing; a JSONL line that does not parse is yielded as a JSONDecodeError."""
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".jsonl":
        def lines():
            for i, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        yield i, json.loads(line)
                    except json.JSONDecodeError as e:
                        yield i, e
        return lines()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(p, f"not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from e
    if not isinstance(data, list):
        raise SchemaError(p, f"expected a JSON list of dialogues or examples, got {type(data).__name__}")

    def flat():
        n = 0
        for di, d in enumerate(data):
            if isinstance(d, dict) and "utterances" in d:
                utts = d["utterances"]
                for u in utts if isinstance(utts, list) else [utts]:
                    n += 1
                    yield n, ({"dialog_idx": d.get("dialog_idx", di), **u} if isinstance(u, dict) else u)
            else:
                n += 1
                yield n, d
    return flat()


def _build(rows: Iterable[tuple[int, Any]], where: str, labels: LabelTable, ambiguous: str,
           on_error: str, responses: str) -> LoadResult:
    sink = RowSink(where, "faithdial", on_error)
    dialogues: dict[Any, list[tuple[int, dict]]] = {}
    for i, ex in rows:
        sink.read()
        if isinstance(ex, Exception):
            sink.malformed(i, f"not valid JSON ({ex})")
            continue
        err = _check_example(ex)
        if err:
            sink.malformed(i, err[1], err[0])
            continue
        dialogues.setdefault(ex["dialog_idx"], []).append((i, ex))

    convs = []
    unlabelled = 0
    for dialog_idx, exs in dialogues.items():
        exs.sort(key=lambda e: len(e[1]["history"]))
        # The longest history carries every earlier utterance; the wizard turns are at the
        # positions given by each example's history length.
        *_, (_, last) = exs
        texts = list(last["history"]) + [last["response"]]
        wizard: dict[int, tuple[int, dict]] = {}
        for i, ex in exs:
            pos = len(ex["history"])
            if (len(texts) - 1 - pos) % 2:
                sink.malformed(i, f"{pos} history utterances put this wizard turn at a seeker position of "
                                  f"dialogue {dialog_idx}", "history")
                continue
            if pos in wizard:
                sink.malformed(i, f"dialogue {dialog_idx} has two examples with {pos} history utterances "
                                  f"(also row {wizard[pos][0]})", "history")
                continue
            if [t.strip() for t in ex["history"]] != [t.strip() for t in texts[:pos]]:
                sink.malformed(i, f"history disagrees with the longest history of dialogue {dialog_idx}",
                               "history")
                continue
            wizard[pos] = (i, ex)
        turns = context_turns(texts[:-1]) + [Turn(ASSISTANT, texts[-1])]
        for pos, (i, ex) in sorted(wizard.items()):
            original = ex.get("original_response") or None
            text = (original or ex["response"]) if responses == "original" else ex["response"]
            begin = list(ex.get("BEGIN") or [])
            meta: dict[str, Any] = {"original_label": begin, "vrm": list(ex.get("VRM") or []),
                                    "edited": original is not None}
            if responses == "original" and original is not None:
                meta["faithdial_response"] = ex["response"]
            gold = None
            if responses == "original" and not begin:
                unlabelled += 1  # no BEGIN annotation: scored, but left out of accuracy
            elif responses == "original":
                try:
                    gold = resolve(labels.classify(begin), ambiguous)
                except UnknownLabel as e:
                    sink.malformed(i, str(e), "BEGIN")
                    turns[pos] = Turn(ASSISTANT, text)
                    continue
                if gold is None:
                    sink.drop(i, f"ambiguous label (ambiguous='drop'), kept as unscored context -- {begin}")
                    turns[pos] = Turn(ASSISTANT, text)
                    continue
            turns[pos] = Turn(ASSISTANT, text, reference=ex["knowledge"], gold_label=gold, meta=meta)
            sink.ok()
        convs.append(Conversation(id=f"{SOURCE}-{dialog_idx}", source=SOURCE, turns=turns,
                                  meta={"benchmark": "faithdial", "dialogue_id": str(dialog_idx),
                                        "responses": responses}))
    if unlabelled:
        sink.report.notes.append(f"{unlabelled} wizard turn(s) without BEGIN labels: scored, gold label None")
    return sink.finish(convs)


def _check_example(ex: Any) -> tuple[str | None, str] | None:
    if not isinstance(ex, dict):
        return None, f"expected an object, got {type(ex).__name__}"
    for key in ("dialog_idx", "history", "knowledge", "response"):
        if key not in ex or ex[key] is None:
            return key, "missing"
    if not isinstance(ex["history"], list) or not all(isinstance(h, str) for h in ex["history"]):
        return "history", "expected a list of strings"
    for key in ("knowledge", "response"):
        if not isinstance(ex[key], str) or not ex[key].strip():
            return key, "expected a non-empty string"
    if ex.get("BEGIN") is not None and not isinstance(ex["BEGIN"], list):
        return "BEGIN", "expected a list of labels"
    return None


# ---------------------------------------------------------------------------------------------
# data-audit CSVs

AUDIT_PATTERNS = ("**/*.csv",)


def claim_category(labels: list[str]) -> str | None:
    """The category of a response judged as one claim from its BEGIN label(s) (module docstring); None for
    Uncooperative alone."""
    found = {ALIASES.get(x, x) for x in (" ".join(lab.lower().split()) for lab in labels)}
    if found & {"hallucination", "partial hallucination"}:
        return LACKING_EVIDENCE
    if "contradiction" in found:
        return CONTRADICTED
    if "generic" in found:
        return OUT_OF_SCOPE
    if "entailment" in found:
        return VERIFIED
    return None


def load_faithdial_audit(source: str | os.PathLike, *, split: str | None = None,
                         ambiguous: str = DEFAULT_AMBIGUOUS,
                         on_error: str = "raise", label_map: Mapping[str, str] | None = None,
                         claims: str = "none") -> LoadResult:
    """Load a FaithDial data-audit CSV (gold or per-model), or every CSV under a directory.

    Each row becomes a conversation: the previous utterance (user) and the annotated response
    (assistant) grounded on the knowledge snippet. All-empty padding rows (gold/topical.csv ends
    with hundreds) are counted as rejected with kind "blank", never raised. The audit has no
    splits; ``split`` is accepted for a uniform interface. ``claims``: "response" /
    "response+abstention" give the response's gold claims (module docstring).
    """
    validate_options(ambiguous, on_error)
    validate_claims_option(claims)
    files = source_files(source, None, AUDIT_PATTERNS, "data-audit CSV")
    labels = LabelTable(LABELS, label_map, ALIASES)
    return merge_results([_load_audit_file(f, labels, ambiguous, on_error, claims) for f in files], source,
                         "faithdial-audit")


def _load_audit_file(path: Path, labels: LabelTable, ambiguous: str, on_error: str,
                     claims: str = "none") -> LoadResult:
    header, rows = read_delimited(path)
    if "BEGIN" in header:  # gold annotations of the human responses
        k_col, r_col, l_col, v_col, model = "evidence", "response", "BEGIN", "VRM", "human"
    elif "begin_label" in header:  # model outputs: the response column is named after the model
        k_col, l_col, v_col = "knowledge", "begin_label", "vrm_label"
        rest = [h for h in header if h not in (k_col, "history", l_col, v_col)]
        if len(rest) != 1:
            raise SchemaError(path, f"expected one model-response column besides knowledge/history/"
                                    f"begin_label/vrm_label, got {rest}")
        r_col = model = rest[0]
    else:
        raise SchemaError(path, f"not a FaithDial data-audit CSV: header {header} has neither 'BEGIN' "
                                f"nor 'begin_label'; see {AUDIT_DOWNLOAD}")
    missing = [c for c in (k_col, "history", r_col, l_col) if c not in header]
    if missing:
        raise SchemaError(path, f"data-audit CSV lacks columns {missing}")
    sink = RowSink(path, "faithdial-audit", on_error)
    sub = path.parent.name
    convs = []
    for i, line, rec, extra in rows:
        sink.read()
        if not any((v or "").strip() for v in rec.values()) and not extra:
            sink.drop(i, "blank row (every field empty)", BLANK)
            continue
        if extra:
            sink.malformed(i, f"{len(header) + len(extra)} cells, expected {len(header)}", line=line)
            continue
        bad = next((c for c in (r_col, l_col) if not (rec.get(c) or "").strip()), None)
        if bad:
            sink.malformed(i, "empty", bad, line)
            continue
        original = rec[l_col].strip()
        try:
            gold = resolve(labels.classify(split_labels(original)), ambiguous)
        except UnknownLabel as e:
            sink.malformed(i, str(e), l_col, line)
            continue
        if gold is None:
            sink.drop(i, f"ambiguous label (ambiguous='drop') -- {original}")
            continue
        history = (rec.get("history") or "").strip()
        knowledge = rec.get(k_col) or ""
        conv = exchange(
            f"{SOURCE}-audit-{sub}-{path.stem}-{i}", SOURCE, [history] if history else [], rec[r_col],
            knowledge, gold,
            {"original_label": original, "vrm": rec.get(v_col), "model": model},
            {"benchmark": "faithdial-audit", "file": f"{sub}/{path.name}", "row": i,
             "dialogue_id": text_key(history, knowledge)},
        )
        category = claim_category(split_labels(original)) if claims != "none" else None
        if category is not None:
            response_claim(conv.turns[-1], category, claims)
        convs.append(conv)
        sink.ok()
    return sink.finish(convs)


# What `vista-distill data fetch faithdial` downloads (the pinned commit and sha256s: data/download/catalogue.py)
FAITHDIAL, FAITHDIAL_HEAD = "McGill-NLP/FaithDial", "25671c6e3aa7d667943b7744a2b91507e7187f83"
FETCH = Source(
    "faithdial", "FaithDial (Dziri et al., 2022): data-audit CSVs (GitHub) and the corpus (Hugging Face Hub)",
    f"https://github.com/{FAITHDIAL} and https://huggingface.co/datasets/{FAITHDIAL}",
    "MIT", "yes, with LICENSE",
    repo_files(FAITHDIAL, FAITHDIAL_HEAD, "faithdial", [
        ("LICENSE", "237b7285cdd6191afd93bcc877ba14cb566276e85ee8025af0555ee54b0145ab"),
        ("README.md", "5fd805ff4e4503159d87d07a6edf3081c12d0abca86eed93390ca34f72e8a12a"),
        ("CITATION.cff", "8ed5c4ce9dc9ac1ad114047e75303b7089165c5106af6972f82a35061ba18853"),
        ("data-audit/README.md", "bb8bb8582a46bc1b2ee6318d882bba42e6040d8330f2293df55615c63d56168d"),
        ("data-audit/gold/wow.csv", "0237ccc1472e9426e3e6631bb3cb8dbbbc7c7083190f633a7db81672992127aa"),
        ("data-audit/gold/cmu.csv", "91aff154c342c1a9c4c74c24c6ef067efca17719e64aa0969419fdbb8d57c9cb"),
        ("data-audit/gold/topical.csv", "4bd585d91e2c2e591220d3167fe6e1806c335d8870414833f32a0fd564f9fdec"),
        ("data-audit/CTRL/ctrl_processed_wow.csv",
         "a547b236b5ab7bd64a93fe6aeb6e2886bd2239e370538563abdd3667c92b5700"),
        ("data-audit/CTRL/ctrl_processed_cmu.csv",
         "fdf6b4fd326cc9c0b7222f4a2c3a6a7b8943ec4feda195adc727b86e11a86664"),
        ("data-audit/CTRL/ctrl_processed_topicalchat.csv",
         "b6c6ed1c3bfeb2578dab05ab694482047119b16ff0e3350b88f6a2f86605b201"),
        ("data-audit/DoHA/doha_processed_wow.csv",
         "45fd23f61e77735169cf693dd7f4eabc0c07c0a855433584f88cd0f85e801929"),
        ("data-audit/DoHA/doha_processed_cmu.csv",
         "20f4e75021bd18f03fb3acc073acf90cde47250b6177ae2cdb1bef17604f2e77"),
        ("data-audit/DoHA/doha_processed_topical.csv",
         "ac2f9a6edb1514b18ce034f1b3ea0f4e68f765cbde4d87f0b6c7ebdd6b5c44b6"),
        ("data-audit/GPT2/gpt2_processed_wow.csv",
         "a74dcc1b8427fb91ce1b173b2ce98a6ed06560299dd9db544e8976d3b6237987"),
        ("data-audit/GPT2/gpt2_processed_cmu.csv",
         "a74c0a9ebfa1603a293b7ffae27b6498fd8f112079c5830b0ac7d48a59c3e5b6"),
        ("data-audit/GPT2/gpt2_processed_topical.csv",
         "7d13fa3258783f76f63963e9aab0a2dc5668003d74b246a8fbda6da6f7be7255"),
    ]) + tuple(Remote(f"faithdial/hub/data/{split}.json", hub_url(FAITHDIAL, f"data/{split}.json"),
                      hub=True) for split in ("train", "valid", "test")),
    note="hub/ is the Hub dataset's data/ folder: `data prepare --benchmark faithdial --source "
         "DIR/faithdial/hub --split test` reads it without the Hub.")

BENCHMARKS = (
    Benchmark("faithdial", load_faithdial,
              "FaithDial corpus (Hub id McGill-NLP/FaithDial or a local copy) or data-audit CSVs",
              path_keys=("faithdial",)),
    Benchmark("faithdial-audit", load_faithdial_audit, "FaithDial data-audit CSVs", path_keys=("data-audit",)),
)
