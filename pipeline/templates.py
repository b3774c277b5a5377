"""Prompt templates for the VISTA pipeline, its baselines and the distilled students.

The few-shot prompts of stages 1-3 and the LLM-as-Judge prompt are the method's specification; their text
(:mod:`.paper_prompts`) is reproduced verbatim from Lewis et al., "VISTA Score: Verification In Sequential Turn-based
Assessment", arXiv 2510.27052, Appendix A.1 (stages 1-3) and A.2 (LLM-as-Judge): the same instructions, the same worked
examples, the appendix's speaker names ("wizard" / "apprentice"). Layout follows the authors' released code: the
instructions are the system message (without the "INSTRUCTIONS:" header), each worked example is a user/assistant pair
whose assistant message is the text after "DECOMPOSITION:" / "CATEGORY:", single newlines inside a block and one blank
line between blocks. ``tests/test_templates.py`` checks them against a verbatim copy of the appendix.

Written for this project (not from the paper; their text is in :mod:`.project_prompts`): the optional stage 4 (does the
target turn contradict the earlier conversation?), the optional world-knowledge stage (is a LACKING EVIDENCE claim true
in the world? after the mixed-context study; few-shot and compact versions), the study's vanilla three-way judge (one
prompt, three labels; our wording of its task, the study's prompt text is not reproduced), a FActScore-style baseline
(Min et al., 2023: decompose the turn without any context, then check each atomic fact against the reference alone) and
the ``compact`` prompts used by fine-tuned students (a short task line with the labels, the same target fields, no
examples).

Output conventions that the parsers rely on: stage 1 and ``factscore_decompose`` answer with a
numbered list, stage 2 and ``factscore_verify`` with a bare label, stage 3 and stage 4 with
"LABEL. explanation", the judge with JSON.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.vocabulary import LABELS
from .paper_prompts import (
    LLM_JUDGE_INSTRUCTIONS,
    STAGE1_EXAMPLES,
    STAGE1_INSTRUCTIONS,
    STAGE2_EXAMPLES,
    STAGE2_INSTRUCTIONS,
    STAGE3_EXAMPLES,
    STAGE3_INSTRUCTIONS,
)
from .project_prompts import (
    COMPACT_INSTRUCTIONS,
    FACTSCORE_DECOMPOSE_EXAMPLES,
    FACTSCORE_DECOMPOSE_INSTRUCTIONS,
    FACTSCORE_VERIFY_EXAMPLES,
    FACTSCORE_VERIFY_INSTRUCTIONS,
    STAGE4_EXAMPLES,
    STAGE4_INSTRUCTIONS,
    WORLD_EXAMPLES,
    WORLD_INSTRUCTIONS,
    WORLD_JUDGE_INSTRUCTIONS,
    WORLD_JUDGE_LABELS,
)
from .protocol import Fields, Request

__all__ = [
    "PROMPTS_VERSION",
    "PROMPT_NAMES",
    "STYLES",
    "Example",
    "PromptTemplate",
    "Speakers",
    "build_messages",
    "factscore_decompose_input",
    "factscore_verify_input",
    "get_template",
    "judge_input",
    "stage1_input",
    "stage2_input",
    "stage3_input",
    "stage4_input",
    "world_input",
    "world_judge_input",
]

PROMPTS_VERSION = "1"
NA = "N/A"
STYLES = ("fewshot", "compact")
PROMPT_NAMES = (
    "stage1",
    "stage2",
    "stage3",
    "stage4",
    "world",
    "world_judge",
    "llm_judge",
    "factscore_decompose",
    "factscore_verify",
)


@dataclass(frozen=True)
class Example:
    """One worked example: a user message and the assistant's answer."""

    input: str
    output: str


@dataclass(frozen=True)
class Speakers:
    """Names given to the two dialogue roles in prompts.

    The default is the appendix's ("apprentice", "wizard"); ``Speakers("user", "assistant")``
    reproduces the authors' released code.
    """

    user: str = "apprentice"
    assistant: str = "wizard"

    def name(self, role: str) -> str:
        """Speaker name for a conversation role ("user" / "assistant")."""
        if role == "user":
            return self.user
        if role == "assistant":
            return self.assistant
        raise ValueError(f"unknown role {role!r}; expected 'user' or 'assistant'")


DEFAULT_SPEAKERS = Speakers()


@dataclass(frozen=True)
class PromptTemplate:
    """A system instruction, its worked examples and the labels the answer is drawn from."""

    name: str
    style: str
    instructions: str
    examples: tuple[Example, ...]
    labels: tuple[str, ...] = ()
    version: str = PROMPTS_VERSION

    @property
    def fingerprint(self) -> str:
        """First 12 hex digits of a sha256 over everything that shapes the prompt (a cache key)."""
        payload = json.dumps(
            {
                "name": self.name,
                "style": self.style,
                "instructions": self.instructions,
                "examples": [[e.input, e.output] for e in self.examples],
                "labels": list(self.labels),
                "version": self.version,
            },
            ensure_ascii=False,
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:12]


# --------------------------------------------------------------------------------------------------
# Target-message builders (shared by the worked examples, so examples and target use one layout)
# --------------------------------------------------------------------------------------------------


def _history_lines(history: Sequence[tuple[str, str]], speakers: Speakers) -> str:
    if not history:
        return NA
    return "\n".join(f"{speakers.name(role)}: {text}" for role, text in history)


def _numbered(items: Sequence[str], start: int = 1) -> str:
    if not items:
        return NA
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, start))


def stage1_input(
    history: Sequence[tuple[str, str]], target: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """Stage 1 user message: the conversation so far and the (assistant) target turn."""
    return (
        f"CONVERSATION HISTORY:\n{_history_lines(history, speakers)}\n\n"
        f"TARGET TURN:\n{speakers.assistant}: {target}"
    )


def stage2_parts(background: Sequence[str], reference: str, claim: str, first_fact: int = 1
                 ) -> tuple[str, str, str, str]:
    """Stage 2's user message in four parts, ``head + reference + tail + claim``: the numbered background up to
    the reference's heading, the reference, the claim's heading, the claim."""
    return (f"BACKGROUND KNOWLEDGE:\n{_numbered(background, first_fact)}\n\nREFERENCE TEXT:\n", reference,
            "\n\nCLAIM:\n", claim)


def stage2_input(background: Sequence[str], reference: str, claim: str, first_fact: int = 1) -> str:
    """Stage 2 user message: numbered background claims (from ``first_fact``: a later chunk of a long
    background keeps its numbers), the reference text and one claim."""
    return "".join(stage2_parts(background, reference, claim, first_fact))


def stage3_input(background: Sequence[str], reference: str, claim: str, first_fact: int = 1) -> str:
    """Stage 3 user message: the same fields as stage 2."""
    return stage2_input(background, reference, claim, first_fact)


def stage4_input(
    history: Sequence[tuple[str, str]], target: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """Stage 4 user message: the same layout as stage 1."""
    return stage1_input(history, target, speakers)


def world_input(claim: str, evidence: Sequence[str] = ()) -> str:
    """World-knowledge stage user message: numbered evidence passages (N/A: the model's own knowledge) and
    one claim."""
    return f"EVIDENCE:\n{_numbered(evidence)}\n\nCLAIM:\n{claim}"


def world_judge_input(reference: str, answer: str) -> str:
    """Three-way judge user message: the source document and the text judged."""
    return f"DOCUMENT:\n{reference}\n\nTEXT:\n{answer}"


def judge_input(
    history: Sequence[tuple[str, str]], reference: str, answer: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> str:
    """LLM-as-Judge user message (Appendix A.2): context, retrieved document(s), answer, task."""
    return (
        f"CONVERSATION CONTEXT\n{_history_lines(history, speakers)}\n\n"
        f"RETRIEVED DOCUMENT(S)\n{reference}\n\n"
        f"ANSWER\n{answer}\n\n"
        "TASK\nDoes the answer contain any hallucinated content? Respond in the JSON format described."
    )


def factscore_decompose_input(target: str) -> str:
    """FActScore-style decomposition input: the target turn alone, no history."""
    return f"TEXT:\n{target}"


def factscore_verify_input(reference: str, claim: str) -> str:
    """FActScore-style verification input: the reference and one claim, nothing else."""
    return f"REFERENCE TEXT:\n{reference}\n\nCLAIM:\n{claim}"


_LABELS = {
    **LABELS,
    "llm_judge": (),
    "world_judge": WORLD_JUDGE_LABELS,
    "factscore_decompose": (),
    "factscore_verify": ("SUPPORTED", "NOT SUPPORTED"),
}


def _numbered_output(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def _build_templates() -> dict[tuple[str, str], PromptTemplate]:
    fewshot: dict[str, tuple[str, tuple[Example, ...]]] = {
        "stage1": (
            STAGE1_INSTRUCTIONS,
            tuple(Example(stage1_input(h, t), _numbered_output(d)) for h, t, d in STAGE1_EXAMPLES),
        ),
        "stage2": (
            STAGE2_INSTRUCTIONS,
            tuple(Example(stage2_input(b, r, c), a) for b, r, c, a in STAGE2_EXAMPLES),
        ),
        "stage3": (
            STAGE3_INSTRUCTIONS,
            tuple(Example(stage3_input(b, r, c), a) for b, r, c, a in STAGE3_EXAMPLES),
        ),
        "stage4": (
            STAGE4_INSTRUCTIONS,
            tuple(Example(stage4_input(h, t), a) for h, t, a in STAGE4_EXAMPLES),
        ),
        "world": (
            WORLD_INSTRUCTIONS,
            tuple(Example(world_input(c, e), a) for e, c, a in WORLD_EXAMPLES),
        ),
        "llm_judge": (LLM_JUDGE_INSTRUCTIONS, ()),
        "world_judge": (WORLD_JUDGE_INSTRUCTIONS, ()),
        "factscore_decompose": (
            FACTSCORE_DECOMPOSE_INSTRUCTIONS,
            tuple(
                Example(factscore_decompose_input(t), _numbered_output(f))
                for t, f in FACTSCORE_DECOMPOSE_EXAMPLES
            ),
        ),
        "factscore_verify": (
            FACTSCORE_VERIFY_INSTRUCTIONS,
            tuple(Example(factscore_verify_input(r, c), a) for r, c, a in FACTSCORE_VERIFY_EXAMPLES),
        ),
    }
    out: dict[tuple[str, str], PromptTemplate] = {}
    for name, (instructions, examples) in fewshot.items():
        out[name, "fewshot"] = PromptTemplate(name, "fewshot", instructions, examples, _LABELS[name])
    for name, instructions in COMPACT_INSTRUCTIONS.items():
        out[name, "compact"] = PromptTemplate(name, "compact", instructions, (), _LABELS[name])
    return out


_TEMPLATES = _build_templates()


def get_template(name: str, style: str = "fewshot") -> PromptTemplate:
    """The template for a prompt name and style; ValueError lists what exists."""
    if name not in PROMPT_NAMES:
        raise ValueError(f"unknown prompt name {name!r}; valid names: {', '.join(PROMPT_NAMES)}")
    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}; valid styles: {', '.join(STYLES)}")
    try:
        return _TEMPLATES[name, style]
    except KeyError:
        have = [s for (n, s) in _TEMPLATES if n == name]
        raise ValueError(
            f"prompt {name!r} has no {style!r} style; valid styles for it: {', '.join(have)}"
        ) from None


# --------------------------------------------------------------------------------------------------
# Messages and rendering
# --------------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"\b(wizard|apprentice|Wizard|Apprentice)\b")


def _substitute(text: str, speakers: Speakers) -> str:
    """Replace the appendix's speaker names by ``speakers`` (whole words, one pass)."""
    mapping = {"wizard": speakers.assistant, "apprentice": speakers.user}

    def repl(m: re.Match[str]) -> str:
        word = m.group(1)
        new = mapping[word.lower()]
        return new[:1].upper() + new[1:] if word[0].isupper() else new

    return _NAME_RE.sub(repl, text)


def build_messages(
    template: PromptTemplate, target_input: str, speakers: Speakers = DEFAULT_SPEAKERS
) -> list[dict[str, str]]:
    """Chat messages: system instructions, one user/assistant pair per example, the target as user.

    ``target_input`` is used as is (build it with the same ``speakers``); the appendix names in the
    instructions and examples are substituted when ``speakers`` is not the default.
    """

    def sub(text: str) -> str:
        return text if speakers == DEFAULT_SPEAKERS else _substitute(text, speakers)

    messages = [{"role": "system", "content": sub(template.instructions)}]
    for ex in template.examples:
        messages.append({"role": "user", "content": sub(ex.input)})
        messages.append({"role": "assistant", "content": sub(ex.output)})
    messages.append({"role": "user", "content": target_input})
    return messages


def render_input(stage: str, fields: Fields, speakers: Speakers = DEFAULT_SPEAKERS) -> str:
    """The user message of a VISTA stage's request from its fields."""
    if stage in ("stage1", "stage4"):
        return stage1_input(fields.history, fields.target or "", speakers)
    if stage in ("stage2", "stage3"):
        return stage2_input(fields.background, fields.reference or "", fields.claim or "", fields.first_fact)
    if stage == "world":
        return world_input(fields.claim or "", fields.evidence)
    raise ValueError(f"no fields layout for stage {stage!r}")


def stage_request(template: PromptTemplate, fields: Fields, speakers: Speakers = DEFAULT_SPEAKERS, *,
                  labels: Sequence[str] = (), max_new_tokens: int = 256, stop_on_repeat: bool = False) -> Request:
    """The request of ``template``'s stage on ``fields``, rendered once here: its messages, and for a stage 2
    label request with a claim the same messages with an empty reference (``Request.twin``)."""
    messages = tuple(build_messages(template, render_input(template.name, fields, speakers), speakers))
    twin: tuple[dict[str, str], ...] = ()
    if template.name == "stage2" and labels and (fields.claim or "").strip() and fields.reference is not None:
        empty = stage2_input(fields.background, "", fields.claim or "", fields.first_fact)
        twin = (*messages[:-1], {**messages[-1], "content": empty})
    return Request(template.name, messages, tuple(labels), max_new_tokens, stop_on_repeat, fields, twin)
