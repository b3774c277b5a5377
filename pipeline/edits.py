"""Rule edits of a sentence: its numbers, dates and capitalised entities (``spans``), the values each could become
(another of the document's, or a nearby one: ``swap_options``, ``nearby``), and a sentence changed so that it
contradicts a claim it supported (``edit_sentence``: one such value swapped, else a verb negated; VitaminC-style,
most words stay). distill/augment.py falsifies claims with them, distill/contrast.py makes contrast rows, and the
evidence probes (scoring/evidence.py) build their ``edit`` probe."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .evidence import sentences

_TOKEN = re.compile(r"[^\W_](?:[\w'’-]*\w)?")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBER_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "twenty",
                "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
# tokens that start a capitalised run without naming anything ("The Eiffel Tower" -> "Eiffel Tower")
LEADING = frozenset((
    "The", "A", "An", "This", "That", "These", "Those", "It", "Its", "He", "She", "They", "His", "Her", "Their", "In",
    "On", "At", "By", "For", "From", "With", "As", "After", "Before", "During", "Since", "Until", "When", "While", "If",
    "Although", "However", "Some", "Many", "Most", "There", "Here", "Also", "And", "But", "Or", "Of", "To", "Each",
    "Every", "Both", "All", "No", "Not", "Only", "One", "I"))
CONNECTORS = frozenset(("of", "de", "du", "da", "del", "della", "der", "van", "von", "the", "la", "le"))
_YEAR = re.compile(r"(?<![\w$£€.,])(1[0-9]{3}|20[0-9]{2})(0s|s)?(?![\w%]|[.,]\d)")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(st|nd|rd|th)?(?![\w]|[.,]\d)")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
_DEMONYM = re.compile(r"(?:an|ian|ean|ese|ish|ic|i)$")


@dataclass(frozen=True)
class Span:
    rule: str       # number / date / entity
    kind: str       # year, decade, month, integer, decimal, ordinal, word, entity, demonym: swaps stay within a kind
    start: int
    end: int
    text: str


def spans(sentence: str) -> list[Span]:
    """Numbers, dates and capitalised entities of one sentence, without overlaps (dates first)."""
    found: list[Span] = []

    def add(span: Span) -> None:
        if not any(s.start < span.end and span.start < s.end for s in found):
            found.append(span)

    for m in _YEAR.finditer(sentence):
        add(Span("date", "decade" if m.group(2) else "year", m.start(), m.end(), m.group(0)))
    for m in _MONTH.finditer(sentence):
        add(Span("date", "month", m.start(), m.end(), m.group(0)))
    for m in _NUMBER.finditer(sentence):
        kind = "ordinal" if m.group(3) else "decimal" if m.group(2) else "integer"
        add(Span("number", kind, m.start(), m.end(), m.group(0)))
    for m in _NUMBER_WORD.finditer(sentence):
        add(Span("number", "word", m.start(), m.end(), m.group(0)))
    for span in _entities(sentence):
        add(span)
    return sorted(found, key=lambda s: s.start)


def _entities(sentence: str) -> Iterator[Span]:
    """Runs of capitalised words (joined by ``of``, ``de``, ...), leading function words dropped; a run
    at the very start of the sentence counts only when it has two or more words (``Convertibles
    evolved`` is no entity, ``Lamborghini Diablo`` is)."""
    tokens = list(_TOKEN.finditer(sentence))
    i = 0
    while i < len(tokens):
        if not tokens[i].group(0)[0].isupper():
            i += 1
            continue
        run, j = [tokens[i]], i + 1
        while j < len(tokens):
            k = j
            while k < len(tokens) and tokens[k].group(0) in CONNECTORS and k - j < 2:
                k += 1
            gaps = all(sentence[a.end():b.start()] == " " for a, b in zip(tokens[j - 1:k], tokens[j:k + 1]))
            if k < len(tokens) and gaps and tokens[k].group(0)[0].isupper():
                run += tokens[j:k + 1]
                j = k + 1
            else:
                break
        i = j
        while run and run[0].group(0) in LEADING:
            run = run[1:]
        if not run or (run[0].start() == 0 and len(run) == 1):
            continue
        start, end = run[0].start(), run[-1].end()
        text = re.sub(r"['’]s$", "", sentence[start:end])
        if text in MONTHS or text in DAYS or text.isdigit():
            continue
        kind = "demonym" if len(run) == 1 and _DEMONYM.search(text) else "entity"
        yield Span("entity", kind, start, start + len(text), text)


def _value(text: str) -> float:
    m = re.match(r"[\d,]+(?:\.\d+)?", text)
    return float(m.group(0).replace(",", "")) if m else 0.0


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def nearby(span: Span, rng: random.Random) -> str | None:
    """A value close to ``span`` of the same kind and format (None when there is none)."""
    t = span.text
    if span.kind == "year":
        options = [str(int(t) + d) for d in range(-10, 11) if d]
    elif span.kind == "decade":
        options = [f"{int(t[:4]) + d}{t[4:]}" for d in (-30, -20, -10, 10, 20, 30)]
    elif span.kind == "month":
        k = MONTHS.index(t)
        options = [MONTHS[(k + d) % 12] for d in (-3, -2, -1, 1, 2, 3)]
    elif span.kind == "word":
        k = NUMBER_WORDS.index(t.lower())
        options = [NUMBER_WORDS[k + d] for d in (-2, -1, 1, 2) if 0 <= k + d < len(NUMBER_WORDS)]
        options = [w.capitalize() if t[0].isupper() else w for w in options]
    elif span.kind == "ordinal":
        n = int(re.match(r"\d+", t).group(0))
        options = [_ordinal(n + d) for d in (-2, -1, 1, 2) if n + d > 0]
    else:
        whole, _, frac = t.replace(",", "").partition(".")
        scaled = int(whole + frac)
        step = 10 ** max(0, len(str(scaled)) - 2)
        options = []
        for d in (-3, -2, -1, 1, 2, 3):
            v = scaled + d * step
            if v <= 0:
                continue
            w, f = (str(v)[:-len(frac)] or "0", str(v)[-len(frac):].rjust(len(frac), "0")) if frac else (str(v), "")
            w = f"{int(w):,}" if "," in t else w
            options.append(f"{w}.{f}" if frac else w)
    return rng.choice(options) if options else None


def _swappable(span: Span, other: Span) -> bool:
    if other.kind != span.kind or other.text.casefold() == span.text.casefold():
        return False
    if span.rule == "entity":
        return not set(span.text.casefold().split()) & set(other.text.casefold().split())
    if span.rule == "number":
        return _value(other.text) != _value(span.text)
    return True


def swap_options(sentence: str, document: Sequence[Span]) -> dict[str, list[tuple[Span, list[str]]]]:
    """Per rule, the spans of ``sentence`` with the document's values each could become."""
    out: dict[str, list[tuple[Span, list[str]]]] = {}
    for span in spans(sentence):
        values = sorted({o.text for o in document if _swappable(span, o) and o.text not in sentence})
        out.setdefault(span.rule, []).append((span, values))
    return out


_NEGATABLE = re.compile(r"\b(is|was|are|were|has|had|have|can|could|will|would|does|did|should|must)\b(?! not\b)")


def edit_sentence(sentence: str, claim: str, document: str, rng: random.Random) -> tuple[str, dict[str, str]] | None:
    """``sentence`` changed so that it contradicts ``claim``: one number, date or entity that the claim repeats
    swapped (for another of ``document``'s, else a nearby value), else a verb the claim repeats with its next word
    negated; None when neither applies."""
    low = claim.casefold()
    document_spans = [sp for s in sentences(document) for sp in spans(s)]
    options = swap_options(sentence, document_spans)
    for rule in rng.sample(sorted(options), len(options)):
        for span, values in rng.sample(options[rule], len(options[rule])):
            if span.text.casefold() not in low:
                continue
            new = rng.choice(values) if values else (nearby(span, rng) if rule != "entity" else None)
            if new is None or new.casefold() in low or new in sentence:
                continue
            return (sentence[:span.start] + new + sentence[span.end:],
                    {"rule": rule, "old": span.text, "new": new})
    for m in _NEGATABLE.finditer(sentence):
        after = sentence[m.end():].split()
        if after and f"{m.group(1)} {after[0]}".casefold() in low:
            edited = sentence[:m.end()] + " not" + sentence[m.end():]
            return edited, {
                "rule": "negation",
                "old": f"{m.group(1)} {after[0]}",
                "new": f"{m.group(1)} not {after[0]}",
            }
    return None
