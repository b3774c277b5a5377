"""Robust parsing of model output: claim lists (stage 1) and category labels (stages 2-4).

Small and reasoning models decorate their answers (markdown, "CATEGORY:" prefixes, numbered or
bulleted lists, trailing explanations, ``<think>`` blocks); these parsers accept all of that and
say why when they cannot find an answer. Raw output is always kept by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,3}[.):]|[-*•‣▪–]|\[\d{1,3}\])\s+(.*\S)\s*$")
_HEADER = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?[A-Z][A-Za-z ]{2,40}:(?:\*\*)?\s*$")
_PREFIX = re.compile(r"^\s*(?:final\s+)?(?:category|label|answer|classification|verdict|output)\s*[:\-]\s*",
                     re.IGNORECASE)
_NO_CLAIMS = re.compile(r"^\s*(?:none|n/?a|no (?:factual )?claims?\.?)\s*$", re.IGNORECASE)


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


def parse_claims(text: str) -> list[str]:
    """Claims from a numbered or bulleted list; with no list markers, one claim per non-empty line."""
    answer, _ = strip_think(text)
    lines = [ln for ln in answer.splitlines() if ln.strip()]
    items = [m.group(1) for ln in lines if (m := _LIST_ITEM.match(_unmarkdown_keep_marker(ln)))]
    if not items:
        items = [ln for ln in lines if not _HEADER.match(ln) and not _NO_CLAIMS.match(ln)]
    claims = [_unmarkdown(c) for c in items]
    return [c for c in claims if c and not _NO_CLAIMS.match(c)]


def _unmarkdown_keep_marker(line: str) -> str:
    # "**1.** claim" -> "1. claim"; keep list markers intact for matching.
    return re.sub(r"(\*\*|__)", "", line)


@dataclass(frozen=True)
class ParsedLabel:
    label: str | None
    explanation: str = ""
    error: str | None = None


def _label_pattern(label: str) -> str:
    # "LACKING EVIDENCE" matches "lacking evidence", "LACKING_EVIDENCE", "Lacking-Evidence";
    # "OUT-OF-SCOPE" matches "out of scope".
    words = re.split(r"[\s_-]+", label)
    return r"\b" + r"[\s_-]*".join(map(re.escape, words)) + r"\b"


def parse_label(text: str, labels: Sequence[str]) -> ParsedLabel:
    """Find which of ``labels`` the output names, preferring the one it starts with.

    "NOT VERIFIED"/"UNVERIFIED" count as UNVERIFIABLE when that is a valid label.
    """
    answer, _ = strip_think(text)
    if not answer:
        return ParsedLabel(None, error="empty output")
    body = _PREFIX.sub("", _unmarkdown(answer.splitlines()[0]) if answer.splitlines() else "")
    rest = answer
    # Longest labels first so "UNVERIFIABLE" is not read as a shorter label it contains.
    ordered = sorted(labels, key=len, reverse=True)
    aliases = {lab: [_label_pattern(lab)] for lab in ordered}
    if "UNVERIFIABLE" in labels:
        aliases["UNVERIFIABLE"] += [r"\bnot[\s_-]+verified\b", r"\bunverified\b", r"\bnot[\s_-]+verifiable\b"]
    if "VERIFIED" in labels:
        aliases["VERIFIED"] = [r"(?<!not )(?<!not-)(?<!un)\bverified\b"]

    def first_match(s: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for lab in ordered:
            for pat in aliases[lab]:
                m = re.search(pat, s, flags=re.IGNORECASE)
                if m and (best is None or m.start() < best[0]):
                    best = (m.start(), lab)
        return best

    for candidate in (body, _PREFIX.sub("", _unmarkdown(rest))):
        hit = first_match(candidate)
        if hit is not None:
            start, lab = hit
            explanation = _explanation_after(candidate, start, lab)
            if candidate is body and len(answer.splitlines()) > 1:
                explanation = (explanation + "\n" + "\n".join(answer.splitlines()[1:])).strip()
            return ParsedLabel(lab, explanation)
    return ParsedLabel(None, error=f"no valid label ({', '.join(labels)}) in output {answer[:120]!r}")


def _explanation_after(s: str, start: int, label: str) -> str:
    m = re.compile(_label_pattern(label) + r"[\s.,;:\-–)]*", re.IGNORECASE).match(s, start)
    tail = s[m.end():] if m else s[start + len(label):]
    return tail.strip().lstrip(".,;:-–) ").strip()
