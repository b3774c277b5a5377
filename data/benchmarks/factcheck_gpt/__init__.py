"""Factcheck-GPT (Wang et al., 2024): human-decomposed and fact-checked ChatGPT answers
(https://github.com/yuxiaw/Factcheck-GPT, Apache-2.0).

File: ``factcheck-GPT-benchmark.jsonl``, one record per line: ``prompt`` (a user question),
``response`` (ChatGPT's answer), ``response_factuality`` (true / false / "NA"), ``revised_response``
and ``sentences`` ({"sentence1": {...}, ...} in answer order). A sentence has ``text``,
``sentence_checkworthiness`` (yes / other / opinion / not_a_claim) and parallel per-claim lists:
``claims`` (human-written atomic claims), ``claim_checkworthiness`` (factual / opinion / not_a_claim),
``claims_factuality_label`` (true / false / "unknown"), ``auto_evidence`` (five retrieved passages per
claim, with ``auto_evidence_url``), ``stance_claim_autoEvid`` (each passage's stance: completely-support
/ partially-support / refute / irrelevant; empty for non-factual claims) and ``human_evidence`` (the
annotators' own evidence, "URL\\n\\nexcerpt", or "NA" where the retrieved passages were enough). The
``subtasks/`` files are these claims flattened; they are not read here.

Each record becomes a two-turn conversation: the user's question, then the answer as the scored
assistant turn whose gold claims are the human atomic claims, in answer order.

Reference (``evidence``): the evidence passages of all the turn's claims, de-duplicated (whitespace
ignored), numbered in order of first use and rendered ``[n] passage`` separated by blank lines.
``"retrieved"`` (default) uses the retrieved passages; ``"human"`` adds the annotators' evidence
excerpts (bare URL lines moved to meta) where they gave any. ``turn.meta["claims"]`` keeps, per gold
claim, its checkworthiness, factuality label, passage numbers in the reference, stances, URLs and
human evidence, so stage 2/3 examples can be built per claim.

Claim categories (documented choices, see data/SOURCES.md): an opinion / not_a_claim claim is
OUT-OF-SCOPE. Otherwise, with ``evidence="retrieved"``, from the stances of its own passages: any
completely-support -> VERIFIED; any refute -> CONTRADICTED; both (conflicting passages) -> the
annotators' factuality label decides (true VERIFIED, false CONTRADICTED, unknown LACKING EVIDENCE);
only partially-support -> ``partial`` ("lacking_evidence", default, or "verified"); only irrelevant
passages (which say nothing about the claim) -> LACKING EVIDENCE. With ``evidence="human"`` the
annotators' factuality label (judged on both kinds of evidence) gives the category the same way.

Undecomposed sentences (``unclaimed``): the annotators wrote no claims for sentences they judged
not check-worthy (other / opinion / not_a_claim: hedges, advice, "As an AI language model ...").
``"skip"`` (default) keeps exactly the published claims and marks such turns
``claims_complete: False`` (so they give no stage-1 example); ``"out_of_scope"`` adds each such
sentence as one OUT-OF-SCOPE claim, which makes the decomposition complete.

Questions (``questions``, with ``unit="sentence"``): a share (0 to 1) of the declarative decomposed sentences
is also given a second time as a yes/no question that presupposes it ("Did you know that the tower is 330 m
tall?", "Have you heard that ..."), with the same claims: dialogue assistants often state facts that way,
and the published answers never do, so a student trained on them alone finds no claim in such a turn. The
copy is the same dialogue (splits keep it with its sentence); its stage 2/3 prompts are the sentence's own,
so only stage 1 gains examples. Which sentences, and which of the two phrasings, depend on the text alone.

Turn label (``turn_label``): ``"from_claims"`` (default) applies the released VISTA rule
(faithful only when every claim is VERIFIED / OUT-OF-SCOPE / ABSTENTION) to the claim categories,
so it agrees with the reference; ``"response"`` takes ``response_factuality`` (true -> faithful,
false -> hallucinated; "NA", given to answers with nothing check-worthy, is the ``ambiguous``
option); ``"none"`` leaves the turn unlabelled.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...download.catalogue import Source, repo_files
from ...loading import (
    AMBIGUOUS,
    DEFAULT_AMBIGUOUS,
    LoadResult,
    RowSink,
    merge_results,
    resolve,
    source_files,
    text_key,
    validate_options,
)
from ...schema import (
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
from ...vocabulary import SAFE, SAFE_CATEGORIES
from ..entry import Benchmark
from ..samples import SAMPLES
from .units import Passages, sentence_conversations

SOURCE = "Factcheck-GPT"
BENCHMARK = "factcheck-gpt"
FILE = "factcheck-GPT-benchmark.jsonl"
DOWNLOAD = f"https://github.com/yuxiaw/Factcheck-GPT ({FILE})"

EVIDENCE_CHOICES = ("retrieved", "human", "closest")
UNIT_CHOICES = ("answer", "sentence")
PARTIAL_CHOICES = ("lacking_evidence", "verified")
TURN_LABEL_CHOICES = ("from_claims", "response", "none")
UNCLAIMED_CHOICES = ("skip", "out_of_scope")

SUPPORT, PARTIAL, REFUTE, IRRELEVANT = "completely-support", "partially-support", "refute", "irrelevant"
STANCES = (SUPPORT, PARTIAL, REFUTE, IRRELEVANT)
NON_FACTUAL = ("opinion", "not_a_claim")            # claim checkworthiness -> OUT-OF-SCOPE
CHECKWORTHINESS = ("factual", *NON_FACTUAL)
# The annotators' claim factuality label (subtask 4 spells unknown "not_enough_evidence").
FACTUALITY = {"true": VERIFIED, "false": CONTRADICTED, "unknown": LACKING_EVIDENCE,
              "not_enough_evidence": LACKING_EVIDENCE}
RESPONSE_LABELS = {"true": FAITHFUL, "false": HALLUCINATED, "na": AMBIGUOUS}
PER_CLAIM = ("claim_checkworthiness", "claims_factuality_label", "auto_evidence", "stance_claim_autoEvid",
             "human_evidence")
_URL_LINE = re.compile(r"^\s*https?://\S+\s*$")
_NO_EVIDENCE = ("", "na", "n/a")


class _Bad(ValueError):
    """A malformed record: ``field`` is the dotted path of the offending value."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class FactcheckOptions:
    """Factcheck-GPT's own loader options (the module docstring): ``evidence``, ``partial``, ``turn_label``,
    ``unclaimed``, ``unit`` and ``questions``; each choice is checked when they are made."""

    evidence: str = "retrieved"
    partial: str = "lacking_evidence"
    turn_label: str = "from_claims"
    unclaimed: str = "skip"
    unit: str = "answer"
    questions: float = 0.0

    def __post_init__(self) -> None:
        for name, choices in (("evidence", EVIDENCE_CHOICES), ("partial", PARTIAL_CHOICES),
                              ("turn_label", TURN_LABEL_CHOICES), ("unclaimed", UNCLAIMED_CHOICES),
                              ("unit", UNIT_CHOICES)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")


def load_factcheck_gpt(source: str | os.PathLike, *, split: str | None = None,
                       ambiguous: str = DEFAULT_AMBIGUOUS, on_error: str = "raise", **options: Any) -> LoadResult:
    """Load ``factcheck-GPT-benchmark.jsonl`` (a file, or the one under a directory; ``split``
    picks ``{split}.jsonl`` instead). ``options``: :class:`FactcheckOptions`, as in the module docstring."""
    validate_options(ambiguous, on_error)
    opts = FactcheckOptions(**options)
    patterns = ("{split}.jsonl", "**/{split}.jsonl") if split else (FILE, f"**/{FILE}")
    files = source_files(source, split, patterns, "Factcheck-GPT JSONL", download=DOWNLOAD)
    if not 0.0 <= float(opts.questions) <= 1.0:
        raise ValueError(f"questions must be a share between 0 and 1, got {opts.questions!r}")
    if opts.questions and opts.unit != "sentence":
        raise ValueError("questions rephrases decomposed sentences: it needs unit='sentence'")
    if opts.unit == "sentence" and opts.turn_label == "response":
        raise ValueError("turn_label='response' labels whole answers; with unit='sentence' use 'from_claims' or 'none'")
    return merge_results([_load_file(f, on_error, opts, ambiguous) for f in files], source, BENCHMARK)


load = load_factcheck_gpt


def _load_file(path: Path, on_error: str, options: FactcheckOptions, ambiguous: str) -> LoadResult:
    sink = RowSink(path, BENCHMARK, on_error)
    convs = []
    row = 0
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            row += 1
            sink.read()
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as e:
                sink.malformed(row, f"not valid JSON ({e.msg}, column {e.colno})", line=line)
                continue
            try:
                made = _conversation((path, row, line), rec, options, ambiguous)
            except _Bad as e:
                sink.malformed(row, str(e), e.field, line)
                continue
            if made is None:
                sink.drop(row, f"ambiguous label (ambiguous='drop') -- response_factuality "
                               f"{rec['response_factuality']!r}")
                continue
            if isinstance(made, list):
                if not made:
                    sink.drop(row, "no sentence with claims (unit='sentence', unclaimed='skip')")
                    continue
                convs.extend(made)
            else:
                convs.append(made)
            sink.ok()
    return sink.finish(convs)


def claim_category(checkworthiness: str, stances: list[str], factuality: str, evidence: str = "retrieved",
                   partial: str = "lacking_evidence") -> tuple[str, str]:
    """A claim's category and the rule that gave it (see the module docstring)."""
    if checkworthiness in NON_FACTUAL:
        return OUT_OF_SCOPE, f"checkworthiness {checkworthiness}"
    if evidence == "human":
        return FACTUALITY[factuality], f"factuality {factuality}"
    if evidence == "closest":   # ``stances`` is the closest passage's stance alone
        if SUPPORT in stances:
            return VERIFIED, f"closest passage: {SUPPORT}"
        if REFUTE in stances:
            return CONTRADICTED, f"closest passage: {REFUTE}"
        if PARTIAL in stances:
            return (VERIFIED if partial == "verified" else LACKING_EVIDENCE), f"closest passage: {PARTIAL}"
        return LACKING_EVIDENCE, f"closest passage: {IRRELEVANT}"
    found = set(stances)
    if SUPPORT in found and REFUTE in found:
        return FACTUALITY[factuality], f"conflicting stances: factuality {factuality}"
    if SUPPORT in found:
        return VERIFIED, SUPPORT
    if REFUTE in found:
        return CONTRADICTED, REFUTE
    if PARTIAL in found:
        return (VERIFIED if partial == "verified" else LACKING_EVIDENCE), f"{PARTIAL} only"
    return LACKING_EVIDENCE, f"{IRRELEVANT} only"


def closest_passage(claim: str, passages: list[str]) -> int:
    """Index of the passage most similar to ``claim`` (TF-IDF cosine over the claim and its passages;
    the first on ties). Chosen from the text alone, never from the stance, so the label stays unseen."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    if len(passages) == 1:
        return 0
    try:
        m = TfidfVectorizer().fit_transform([claim, *passages])
    except ValueError:   # no word in any text
        return 0
    sims = cosine_similarity(m[0], m[1:])[0]
    return int(sims.argmax())


def _norm(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower()


def _text(rec: dict[str, Any], key: str, where: str = "") -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _Bad(where + key, "missing" if value is None else f"expected a non-empty string, got {value!r:.60}")
    return value


def human_excerpt(raw: str) -> str | None:
    """The annotators' evidence without its bare URL lines; None for "NA" or a URL alone."""
    if raw.strip().lower() in _NO_EVIDENCE:
        return None
    text = "\n".join(line for line in raw.strip().splitlines() if not _URL_LINE.match(line)).strip()
    return text or None


def _conversation(where: tuple[Path, int, int], rec: Any, options: FactcheckOptions,
                  ambiguous: str) -> Conversation | list[Conversation] | None:
    """Record ``rec`` at ``where`` (file, row, line) as a conversation (``unit="sentence"``: one per sentence)."""
    path, row, line = where
    evidence, partial, turn_label = options.evidence, options.partial, options.turn_label
    unclaimed, unit, questions = options.unclaimed, options.unit, float(options.questions)
    if not isinstance(rec, dict):
        raise _Bad(None, f"expected a JSON object, got {type(rec).__name__}")
    if "prompt" not in rec and "claim" in rec:
        raise _Bad("prompt", f"a claim-level subtask record, not a benchmark record: load {FILE}")
    prompt, response = _text(rec, "prompt"), _text(rec, "response")
    if "response_factuality" not in rec:
        raise _Bad("response_factuality", "missing")
    original = rec["response_factuality"]
    if _norm(original) not in RESPONSE_LABELS:
        raise _Bad("response_factuality", f"expected true, false or \"NA\", got {original!r}")
    sentences = rec.get("sentences")
    if not isinstance(sentences, dict):
        raise _Bad("sentences", "missing" if sentences is None else
                   f"expected an object of sentence objects, got {type(sentences).__name__}")

    passages = Passages()
    claims: list[Claim] = []
    claim_meta: list[dict[str, Any]] = []
    sentence_meta: list[dict[str, Any]] = []
    undecomposed: list[int] = []
    for si, (key, sent) in enumerate(sentences.items()):
        where = f"sentences.{key}."
        if not isinstance(sent, dict):
            raise _Bad(where[:-1], f"expected a sentence object, got {type(sent).__name__}")
        text = _text(sent, "text", where)
        parsed = _claims(sent, where, evidence)
        worthiness = sent.get("sentence_checkworthiness")
        sentence_meta.append({"text": text, "checkworthiness": worthiness,
                              "factuality": sent.get("sentence_factuality_label"), "claims": len(parsed)})
        if not parsed:
            undecomposed.append(si)
            if unclaimed == "out_of_scope":
                claims.append(Claim(" ".join(text.split()), OUT_OF_SCOPE))
                claim_meta.append({"sentence": si, "checkworthiness": worthiness, "factuality": None,
                                   "rule": "undecomposed sentence (not check-worthy)", "passages": [],
                                   "stances": [], "urls": [], "human_evidence": None})
            continue
        for c in parsed:
            if evidence == "closest" and c["passages"]:
                k = closest_passage(c["text"], c["passages"])
                c = {**c, "passages": [c["passages"][k]], "stances": c["stances"][k:k + 1] if c["stances"] else [],
                     "urls": c["urls"][k:k + 1] if len(c["urls"]) == len(c["passages"]) else c["urls"]}
            numbers = [passages.add(p) for p in c["passages"]]
            excerpt = human_excerpt(c["human_evidence"])
            human_number = passages.add(excerpt) if evidence == "human" and excerpt else None
            label, rule = claim_category(c["checkworthiness"], c["stances"], c["factuality"], evidence, partial)
            claims.append(Claim(c["text"], label))
            claim_meta.append({"sentence": si, "checkworthiness": c["checkworthiness"],
                               "factuality": c["factuality"], "rule": rule, "passages": numbers,
                               "stances": c["stances"], "urls": c["urls"],
                               "human_evidence": None if _norm(c["human_evidence"]) in _NO_EVIDENCE
                               else c["human_evidence"], "human_passage": human_number})

    gold, label_source = None, "none"
    if turn_label == "from_claims":
        gold, label_source = (FAITHFUL if all(c.label in SAFE_CATEGORIES[SAFE] for c in claims) else HALLUCINATED,
                              "claims (released VISTA rule)")
    elif turn_label == "response":
        gold, label_source = resolve(RESPONSE_LABELS[_norm(original)], ambiguous), "response_factuality"
        if gold is None:
            return None
    complete = unclaimed == "out_of_scope" or not undecomposed
    meta = {"original_label": original, "label_source": label_source, "evidence": evidence,
            "claims_complete": complete,   # False: sentences the annotators did not decompose
            "undecomposed_sentences": undecomposed, "claims": claim_meta, "sentences": sentence_meta,
            "revised_response": rec.get("revised_response")}
    key = text_key(prompt, response, n=12)
    conv = Conversation(
        id=f"{SOURCE}-{key}", source=SOURCE,
        turns=[Turn(USER, prompt),
               Turn(ASSISTANT, response, reference=passages.render(), gold_label=gold, gold_claims=claims,
                    meta=meta)],
        meta={"benchmark": BENCHMARK, "file": path.name, "row": row, "line": line, "dialogue_id": key})
    return sentence_conversations(conv, passages.texts, questions) if unit == "sentence" else conv


def _claims(sent: dict[str, Any], where: str, evidence: str) -> list[dict[str, Any]]:
    """The sentence's claims with their parallel fields, checked."""
    texts = sent.get("claims")
    if not isinstance(texts, list):
        raise _Bad(where + "claims", "missing" if texts is None else "expected a list of strings")
    n = len(texts)
    for name in PER_CLAIM:
        value = sent.get(name)
        if not isinstance(value, list) or len(value) != n:
            got = "missing" if value is None else (f"{len(value)} items" if isinstance(value, list)
                                                  else type(value).__name__)
            raise _Bad(where + name, f"expected a list with one item per claim ({n}), got {got}")
    urls = sent.get("auto_evidence_url")
    out = []
    for j, text in enumerate(texts):
        at = f"[{j}]"
        if not isinstance(text, str) or not text.strip():
            raise _Bad(f"{where}claims{at}", f"expected a non-empty string, got {text!r:.60}")
        worthiness = sent["claim_checkworthiness"][j]
        if worthiness not in CHECKWORTHINESS:
            raise _Bad(f"{where}claim_checkworthiness{at}", f"expected one of {CHECKWORTHINESS}, got {worthiness!r}")
        factuality = _norm(sent["claims_factuality_label"][j])
        if factuality not in FACTUALITY:
            raise _Bad(f"{where}claims_factuality_label{at}",
                       f"expected true, false or \"unknown\", got {sent['claims_factuality_label'][j]!r}")
        found, stances = sent["auto_evidence"][j], sent["stance_claim_autoEvid"][j]
        if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
            raise _Bad(f"{where}auto_evidence{at}", "expected a list of passage strings")
        if not isinstance(stances, list) or len(stances) not in (0, len(found)):
            raise _Bad(f"{where}stance_claim_autoEvid{at}",
                       f"expected one stance per passage ({len(found)}) or none, got {stances!r:.80}")
        for k, stance in enumerate(stances):
            if stance not in STANCES:
                raise _Bad(f"{where}stance_claim_autoEvid{at}[{k}]", f"expected one of {STANCES}, got {stance!r}")
        if not stances and worthiness == "factual" and evidence == "retrieved":
            raise _Bad(f"{where}stance_claim_autoEvid{at}", "no stances for a factual claim")
        human = sent["human_evidence"][j]
        if not isinstance(human, str):
            raise _Bad(f"{where}human_evidence{at}", f"expected a string (\"NA\" for none), got {human!r:.60}")
        claim_urls = urls[j] if isinstance(urls, list) and len(urls) == n and isinstance(urls[j], list) else []
        out.append({"text": text.strip(), "checkworthiness": worthiness, "factuality": factuality,
                    "passages": list(found), "stances": list(stances),
                    "urls": claim_urls, "human_evidence": human})
    return out


def build_sample(data: Path, out: Path = SAMPLES) -> list[str]:
    """Copy the benchmark file and its Apache-2.0 LICENSE from ``factcheck_gpt/`` under ``data`` to
    ``factcheck_gpt/`` under ``out``, unchanged (the demo's stage-1 material). Returns what it wrote."""
    folder = out / "factcheck_gpt"
    folder.mkdir(parents=True, exist_ok=True)
    for name in (FILE, "LICENSE"):
        shutil.copyfile(data / "factcheck_gpt" / name, folder / name)
    return [f"factcheck_gpt/{FILE}, factcheck_gpt/LICENSE: copied"]


# What `vista-distill data fetch factcheck-gpt` downloads (the pinned commit and sha256s: data/download/catalogue.py)
FACTCHECK, FACTCHECK_HEAD = "yuxiaw/Factcheck-GPT", "a9e6a04a953ad880806529c504a679dd1ad06528"

FETCH = Source(
    "factcheck_gpt", "Factcheck-GPT (Wang et al., 2024): benchmark and subtask files",
    f"https://github.com/{FACTCHECK}", "Apache-2.0", "yes, with LICENSE",
    repo_files(FACTCHECK, FACTCHECK_HEAD, "factcheck_gpt", [
        ("LICENSE", "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"),
        ("factcheck-GPT-benchmark.jsonl", "8bbf41a58ee1b7431fecd2a23f231f764e378e04edeb4d2a7a83949a7f40cf4b"),
        ("subtasks/subtask2_claim_checkworthiness.jsonl",
         "8b2591e69f4b96f5b8c6dc9fd551c6d064ca41c2f2b1cc9b61f8473ac93faff0"),
        ("subtasks/subtask3_claim_evidence_stance.jsonl",
         "3bfa17d7b37bca82bcc0aacf69a8bbd85cffe117d337c95cf7c3b00e34b98d1a"),
        ("subtasks/subtask4_claim_factuality.jsonl",
         "b87f971ce324c87e0427f100fe24b50594b9d44e3a764490b1bef188917dbae1"),
    ]))

BENCHMARKS = (
    Benchmark(
        "factcheck-gpt",
        load_factcheck_gpt,
        "Factcheck-GPT benchmark JSONL: question + ChatGPT answer with human atomic claims and evidence",
        path_keys=("factcheck_gpt", "factcheck-gpt"),
        first_line_keys=("response_factuality",),
        options_type=FactcheckOptions,
    ),
)
