"""Factcheck-GPT's finer units: the turn's reference as numbered passages, one conversation per decomposed
answer sentence (``unit="sentence"``), and sentences rephrased as presupposing questions."""

from __future__ import annotations

from ...loading import text_key
from ...schema import ASSISTANT, FAITHFUL, HALLUCINATED, Conversation, Turn
from ...vocabulary import SAFE, SAFE_CATEGORIES


class Passages:
    """The turn's reference: de-duplicated passages numbered from 1 in order of first use."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.numbers: dict[str, int] = {}

    def add(self, text: str) -> int | None:
        key = " ".join(text.split())
        if not key:
            return None
        if key not in self.numbers:
            self.texts.append(text.strip())
            self.numbers[key] = len(self.texts)
        return self.numbers[key]

    def render(self) -> str:
        return "\n\n".join(f"[{n}] {t}" for n, t in enumerate(self.texts, start=1))



# capitalised only because they start the sentence: lowercased inside a question
_SENTENCE_START = frozenset((
    "The", "A", "An", "It", "Its", "This", "That", "These", "Those", "There", "They", "Their", "He", "His", "She",
    "Her", "In", "On", "At", "By", "For", "From", "With", "As", "After", "Before", "During", "Since", "Some", "Many",
    "Most", "Each", "Every", "Both", "All", "One", "According", "Although", "While", "When", "Today", "Currently"))
_QUESTION_OPENERS = ("Did you know that", "Have you heard that")


def as_question(sentence: str, share: float) -> str | None:
    """``sentence`` as a yes/no question that presupposes it, for about ``share`` of the declarative
    sentences (chosen by a hash of the text); None for the others and for questions, exclamations and
    first-person sentences ("I", "As an AI ..."), whose content a presupposing question would change."""
    text = " ".join(sentence.split())
    words = text.split(" ")
    if (share <= 0 or not text.endswith(".") or "?" in text or not text[0].isupper() or len(words) < 4
            or words[0] in ("I", "I'm", "As", "We", "My", "Our") or words[0].endswith(",")):
        return None
    h = int(text_key(text, n=8), 16)
    if h % 10_000 >= share * 10_000:
        return None
    first = words[0].lower() if words[0] in _SENTENCE_START else words[0]
    return f"{_QUESTION_OPENERS[h % 2]} {' '.join([first, *words[1:]])[:-1].rstrip()}?"


def sentence_conversations(conv: Conversation, passage_texts: list[str],
                           questions: float = 0.0) -> list[Conversation]:
    """One conversation per decomposed answer sentence: the question, then the sentence as the scored
    turn with its own claims and passages. ``dialogue_id`` stays the answer's, so splits keep the
    sentences of one answer together. Sentences without claims are left out (with
    ``unclaimed='out_of_scope'`` they keep their one OUT-OF-SCOPE claim). ``questions``: the share of
    sentences also given as a question (:func:`as_question`), a copy with id suffix ``q``."""
    question, answer = conv.turns
    meta = answer.meta
    texts = dict(enumerate(passage_texts, start=1))
    out = []
    for si, sent in enumerate(meta["sentences"]):
        idx = [i for i, m in enumerate(meta["claims"]) if m["sentence"] == si]
        if not idx:
            continue
        passages = Passages()
        claim_meta = []
        for i in idx:
            m = dict(meta["claims"][i])
            m["passages"] = [passages.add(texts[n]) for n in m["passages"] if n is not None]
            if m.get("human_passage") is not None:
                m["human_passage"] = passages.add(texts[m["human_passage"]])
            claim_meta.append(m)
        claims = [answer.gold_claims[i] for i in idx]
        gold = None if answer.gold_label is None else (
            FAITHFUL if all(c.label in SAFE_CATEGORIES[SAFE] for c in claims) else HALLUCINATED)
        smeta = {k: v for k, v in meta.items() if k not in ("claims", "sentences", "undecomposed_sentences",
                                                          "revised_response")}
        smeta.update(claims=claim_meta, sentence=si, claims_complete=True,
                     label_source="claims (released VISTA rule)" if gold is not None else "none")
        text, reference = " ".join(sent["text"].split()), passages.render()
        out.append(Conversation(
            id=f"{conv.id}-s{si + 1}", source=conv.source,
            turns=[question, Turn(ASSISTANT, text, reference=reference,
                                  gold_label=gold, gold_claims=claims, meta=smeta)],
            meta={**conv.meta, "sentence": si + 1}))
        asked = as_question(text, questions)
        if asked is not None:
            out.append(Conversation(
                id=f"{conv.id}-s{si + 1}q", source=conv.source,
                turns=[question, Turn(ASSISTANT, asked, reference=reference, gold_label=gold,
                                      gold_claims=claims, meta={**smeta, "rephrased": "question", "original": text})],
                meta={**conv.meta, "sentence": si + 1, "rephrased": "question"}))
    return out
