"""Strict parsing of model output: claim lists (stage 1) and category labels (stages 2-4).

Models decorate their answers (markdown, "CATEGORY:" prefixes, numbered or bulleted lists, quotes,
trailing explanations, ``<think>`` blocks); the parsers look through that decoration but no further.

Labels: as in the VISTA authors' code, a label counts only when the answer *starts* with it. A label
named later ("The claim cannot be verified."), negated ("not CONTRADICTED"), hedged ("possibly
VERIFIED", "VERIFIED?") or offered next to another label ("VERIFIED or UNVERIFIABLE") gives no label
and an error saying which. Text after the label ("CONTRADICTED - the text says 1990") is the
explanation and may name other labels freely.

Aliases: when UNVERIFIABLE is a valid label, an answer that *starts* with "UNVERIFIED", "NOT VERIFIED"
or "NOT VERIFIABLE" is UNVERIFIABLE: stage 2 defines UNVERIFIABLE as "cannot be confirmed as factually
TRUE", which is what these say, and at the start they are the answer, not a comment on one. Other
negations at the start ("Not CONTRADICTED", "Cannot be verified") are refused.

Claim lists: items of a numbered or bulleted list, or one claim per line when there is no list.
Refusals, meta prose ("Here are the claims:", "Note: ..."), headers and empty items are rejected with
a reason, never read as claims. Raw output is always kept by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*•‣▪–]|\[\d{1,3}\])\s+(.*\S)\s*$")
_EMPTY_ITEM = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*•‣▪–]|\[\d{1,3}\])\s*$")
_HEADER = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?[A-Z][A-Za-z ]{2,40}:(?:\*\*)?\s*$")
_NO_CLAIMS = re.compile(
    r"^\s*(?:none|n/?a|nothing|no (?:factual |atomic |verifiable )?claims?(?: found)?"
    r"|there (?:are|is) no (?:factual |atomic |verifiable )?claims?\b.*"
    r"|(?:the )?(?:response|turn|text|statement) (?:contains|has|makes) no (?:factual |atomic )?claims?\b.*)"
    r"\s*[.!]?\s*$",
    re.IGNORECASE)
_REFUSAL = re.compile(
    r"^\W*(?:(?:i'?m|i am)\s+(?:so\s+|very\s+|really\s+)?sorry\b|sorry\b|i\s+apologi[sz]e\b|my apologies\b"
    r"|as an ai\b|as a (?:large )?language model\b"
    r"|(?:unfortunately,?\s+)?i(?:\s+am|'m)?\s+(?:can't|cant|cannot|can not|won't|will not|unable|not able)"
    r"\s+(?:to\s+)?(?:help|assist|comply|provide|do (?:that|this)|fulfil+|complete|answer|perform|process|"
    r"decompose|extract|generate|continue)\b)",
    re.IGNORECASE)
_META = re.compile(
    r"^\W*(?:here(?:'s| is| are)\b|below (?:is|are)\b|the following (?:is|are|claims|atomic|facts)\b"
    r"|(?:sure|certainly|okay|ok|of course|absolutely)\b\s*[,.!:]"
    r"|(?:note|notes|n\.b\.|explanation|reasoning)\s*:|i hope\b|hope this helps|let me know\b|feel free\b"
    r"|i(?:'ve| have) (?:decomposed|broken|extracted|listed|identified)\b)"
    r"|^.*\b(?:claims?|facts?|statements?|decomposition)\b.*:\W*$",
    re.IGNORECASE)

# Decoration in front of an answer: markdown, list markers, quotes/brackets, tags, "LABEL:"-like prefixes.
_LEAD = re.compile(
    r"^(?:\s+|#+\s*|>\s*|\*+|_+|`+|[\"'“”‘’«»(\[{]+|<[A-Za-z_]+>"
    r"|\(?\d{1,3}[.):](?=\s)|\[\d{1,3}\](?=\s)|[-•‣▪–—](?=\s)"
    r"|(?:(?:the\s+)?final\s+|my\s+)?(?:category|label|answer|classification|verdict|output|result|decision|"
    r"judge?ment|prediction|response|class)[\"'*_`]*\s*(?:[:=\-–—]|is\s*:)\s*)",
    re.IGNORECASE)
_CLOSERS = re.compile(r"^(?:[\"'“”‘’»)\]}*_`]+|</[A-Za-z_]+>)+")
_SEPARATOR = re.compile(r"[.!;:\n]|\s[-–—]+\s|[–—]|\s--")
_NEGATION = re.compile(r"\b(?:not|never|cannot|can't|cant|can not|isn't|wasn't|aren't|doesn't|don't|won't|"
                       r"neither|nor|no longer|hardly|without)\b|n't\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:possibly|probably|maybe|perhaps|likely|unlikely|partially|partly|mostly|largely|"
                    r"somewhat|arguably|presumably|apparently|seemingly|might|may be|could be|i think|i believe|"
                    r"i guess|it seems|seems|not sure|unsure|uncertain|unclear|borderline|tentatively|"
                    r"leaning)\b|\?", re.IGNORECASE)
_NEGATED_AFTER = re.compile(r"^[\s,]*(?:(?:is|was|would be|are)\s+)?(?:not|n't|incorrect|wrong|false)\b",
                            re.IGNORECASE)


def strip_think(text: str) -> tuple[str, str]:
    """Remove ``<think>...</think>`` blocks (an unclosed one runs to the end); return (answer, thoughts)."""
    thoughts = [m.strip() for m in _THINK.findall(text)]
    answer = _THINK.sub("", text)
    # A template may open the think block itself, leaving only a closing tag in the output.
    if "</think>" in answer.lower():
        head, _, answer = re.split(r"(</think>)", answer, maxsplit=1, flags=re.IGNORECASE)
        thoughts.insert(0, head.strip())
    return answer.strip(), "\n".join(t for t in thoughts if t)


def _unmarkdown(line: str) -> str:
    line = re.sub(r"(\*\*|__|`)", "", line)
    return line.strip().strip('"').strip()


def _unmarkdown_keep_marker(line: str) -> str:
    # "**1.** claim" -> "1. claim"; keep list markers intact for matching.
    return re.sub(r"(\*\*|__)", "", line)


# ------------------------------------------------------------------------------------------------
# Stage 1: claim lists
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedClaims:
    """A stage 1 answer read as claims, with every line that was not a claim and why."""

    claims: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)   # (line, reason)
    truncated_line: str | None = None   # the unfinished last line of an answer cut at its token budget
    refusal: bool = False               # the model refused (and gave no claims)


def _why_not_a_claim(text: str, *, list_item: bool) -> str | None:
    # A list item is the answer's own format for a claim, so it is never read as a refusal: a turn that
    # apologises ("Sorry, I can't answer that.") may be copied into the list as a claim to verify.
    text = text.replace("\u2019", "'")
    if re.match(r"#+(?:\s|$)", text):
        return "header"
    if not text:
        return "empty item"
    if not list_item and _REFUSAL.match(text):
        return "refusal"
    if _NO_CLAIMS.match(text):
        return "says there are no claims"
    if _META.match(text):
        return "meta prose"
    if _HEADER.match(text) or text.rstrip("*_ ").endswith(":"):
        return "header"
    return None


def parse_claim_list(text: str, *, truncated: bool = False) -> ParsedClaims:
    """Claims of a stage 1 answer: list items when it has a list, else one claim per non-empty line.

    ``truncated``: generation stopped at its token budget, so the last line is unfinished; it is dropped
    and returned as ``truncated_line`` (unless the answer ends with a newline, i.e. the line was finished).
    """
    answer, _ = strip_think(text)
    lines = [ln.strip() for ln in answer.splitlines() if ln.strip()]
    truncated_line = None
    if truncated and lines and not re.search(r"\n\s*$", text):
        truncated_line = lines.pop()
    items = {i: m.group(1) for i, ln in enumerate(lines) if (m := _LIST_ITEM.match(_unmarkdown_keep_marker(ln)))}
    claims: list[str] = []
    rejected: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        if items and i not in items:
            reason = ("empty item" if _EMPTY_ITEM.match(_unmarkdown_keep_marker(line))
                      else _why_not_a_claim(_unmarkdown(line), list_item=False) or "not a list item")
        else:
            candidate = _unmarkdown(items.get(i, line))
            reason = _why_not_a_claim(candidate, list_item=i in items)
            if reason is None:
                claims.append(candidate)
                continue
        rejected.append((line, reason))
    refused = any(reason == "refusal" for _, reason in rejected)
    return ParsedClaims(claims, rejected, truncated_line, refusal=refused and not claims)


_ORDINAL = re.compile(r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
                      r"|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth"
                      r"|\d+(?:st|nd|rd|th))\b")


def claim_key(text: str) -> str:
    """What two claims of one turn must differ in beyond case, spacing and ordinal words to be two claims. A small
    model that counts through a template ("The first claim is a single claim.", "The second claim is ...") says
    one claim again and again; no two human claims of one Factcheck-GPT sentence (678 claims) or of one turn of
    VISTA's human set (229) differ in ordinal words alone. Stage 1's duplicates and its repeated-line stop use it."""
    return _ORDINAL.sub("#", " ".join(text.lower().split()))


def parse_claims(text: str) -> list[str]:
    """Claims from a numbered or bulleted list; with no list markers, one claim per non-empty line."""
    return parse_claim_list(text).claims


# ------------------------------------------------------------------------------------------------
# Stages 2-4: labels
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedLabel:
    label: str | None
    explanation: str = ""
    error: str | None = None


def _label_pattern(label: str) -> str:
    # "LACKING EVIDENCE" matches "lacking evidence", "LACKING_EVIDENCE", "Lacking-Evidence";
    # "OUT-OF-SCOPE" matches "out of scope".
    words = re.split(r"[\s_-]+", label)
    return r"(?<![A-Za-z0-9_-])" + r"[\s_-]*".join(map(re.escape, words)) + r"(?![A-Za-z0-9_])"


def _patterns(labels: Sequence[str]) -> list[tuple[re.Pattern[str], str]]:
    """(pattern, label) pairs, longest first so "NOT SUPPORTED" wins over "SUPPORTED" at the same place."""
    pats = [(_label_pattern(lab), lab) for lab in labels]
    if "UNVERIFIABLE" in labels:
        pats += [(_label_pattern(a), "UNVERIFIABLE") for a in ("NOT VERIFIED", "NOT VERIFIABLE", "UNVERIFIED")
                 if a not in labels]
    pats.sort(key=lambda p: len(p[0]), reverse=True)
    return [(re.compile(p, re.IGNORECASE), lab) for p, lab in pats]


def _strip_lead(s: str) -> str:
    while (m := _LEAD.match(s)) and m.end():
        s = s[m.end():]
    return s


def _match_at_start(s: str, pats: list[tuple[re.Pattern[str], str]]) -> tuple[str, int] | None:
    best: tuple[str, int] | None = None
    for pat, lab in pats:
        m = pat.match(s)
        if m and (best is None or m.end() > best[1]):
            best = (lab, m.end())
    return best


def _mentions(s: str, pats: list[tuple[re.Pattern[str], str]]) -> list[tuple[int, int, str, bool]]:
    """Non-overlapping (start, end, label, negated) mentions of labels in ``s``, in order."""
    found: list[tuple[int, int, str]] = []
    for pat, lab in pats:   # longest patterns first: a longer mention claims its span
        for m in pat.finditer(s):
            if all(m.end() <= a or m.start() >= b for a, b, _ in found):
                found.append((m.start(), m.end(), lab))
    out = []
    for a, b, lab in sorted(found):
        before = " ".join(s[:a].split()[-3:])   # a negation up to three words before the label
        out.append((a, b, lab, bool(_NEGATION.search(before))))
    return out


def _first_sentence(s: str) -> str:
    m = re.search(r"[.!?;\n](?:\s|$)", s)
    return s[: m.end()].strip() if m else s.strip()


def _explain_failure(head: str, answer: str, labels: Sequence[str],
                     pats: list[tuple[re.Pattern[str], str]]) -> str:
    """Why an answer that does not start with a label gives none."""
    sentence = _first_sentence(head)
    mentions = _mentions(sentence, pats)
    if not mentions:
        if not _mentions(answer, pats):
            return f"no valid label ({', '.join(labels)}) in output {answer[:120]!r}"
        return f"does not start with a label: the answer must start with one of {', '.join(labels)}; " \
               f"got {answer[:120]!r}"
    negated = [sentence[a:b] for a, b, _, neg in mentions if neg]
    hedged = _HEDGE.search(sentence[: mentions[0][1]]) or sentence.rstrip().endswith("?")
    distinct = sorted({lab for *_, lab, neg in mentions if not neg})
    if negated:
        why = f"negated label {negated[0]!r}"
    elif hedged:
        why = "hedged"
    elif len(distinct) > 1:
        why = f"several labels ({', '.join(distinct)})"
    else:
        why = f"label {distinct[0]} is not at the start"
    return f"does not start with a label ({why}) in {sentence[:120]!r}"


def parse_label(text: str, labels: Sequence[str]) -> ParsedLabel:
    """The label that ``text`` starts with, after its decoration; else ``label=None`` with the reason.

    "UNVERIFIED", "NOT VERIFIED" and "NOT VERIFIABLE" at the start count as UNVERIFIABLE when that is a
    valid label. The explanation is the rest of the answer after the label and its separator.
    """
    answer, _ = strip_think(text)
    if not answer:
        return ParsedLabel(None, error="empty output")
    pats = _patterns(labels)
    clean = re.sub(r"\*\*|__|`", "", answer)
    head = _strip_lead(clean)
    hit = _match_at_start(head, pats)
    if hit is None:
        return ParsedLabel(None, error=_explain_failure(head, answer, labels, pats))
    label, end = hit
    shown = head[:end]
    rest = head[end:]
    rest = rest[m.end():] if (m := _CLOSERS.match(rest)) else rest
    sep = _SEPARATOR.search(rest)
    span = rest[: sep.start()] if sep else rest   # what still belongs to the label position
    if rest[:1] == "(":   # "VERIFIED (probably)": an attached parenthesis is part of it
        span = rest[: rest.find(")") + 1 or len(rest)]
    around = f"{shown}{span}".strip()
    in_span = _mentions(span, pats)
    others = [(lab, neg) for *_, lab, neg in in_span if lab != label]
    if any(not neg for _, neg in others):
        names = sorted({label, *(lab for lab, neg in others if not neg)})
        return ParsedLabel(None, error=f"several labels ({', '.join(names)}) in {around[:120]!r}")
    if span.lstrip().startswith("?") or _HEDGE.search(" ".join(span.split()[:4])):
        return ParsedLabel(None, error=f"hedged label {around[:120]!r}")
    if _NEGATED_AFTER.match(span) and not in_span:
        return ParsedLabel(None, error=f"negated label {around[:120]!r}")
    explanation = rest.strip().lstrip(".,;:!-–—) \n").strip()
    first_line = _strip_lead(explanation.split("\n", 1)[0])
    second = _match_at_start(first_line, pats)
    if second and second[0] != label and not first_line[second[1]:].strip(" .!*_\"'`)]"):
        return ParsedLabel(None, error=f"several labels ({label}, {second[0]}) on separate lines in {answer[:120]!r}")
    listed = [h[0] for ln in explanation.splitlines()[1:] if _LIST_ITEM.match(_unmarkdown_keep_marker(ln))
              and (h := _match_at_start(_strip_lead(re.sub(r"\*\*|__|`", "", ln)), pats)) and h[0] != label]
    if listed:   # "1. OUT-OF-SCOPE - ...\n2. CONTRADICTED - ...": the options echoed, not one chosen
        names = ", ".join(dict.fromkeys([label, *listed]))
        return ParsedLabel(None, error=f"several labels ({names}) listed in {answer[:120]!r}")
    return ParsedLabel(label, explanation)
