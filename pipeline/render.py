"""The one prompt renderer: chat messages through the tokenizer's own chat template."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _merge_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Fold a leading system message into the first user message ("{system}\\n\\n{user}")."""
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


# Variables every render passes to the chat template unless told otherwise: reasoning models
# (Qwen3, and templates that read the same switch) answer directly instead of opening a <think> block
# that the VISTA prompts' short budgets would cut off. Templates that do not read a variable ignore it.
THINKING_OFF: dict[str, Any] = {"enable_thinking": False}


def render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool = True,
           template_kwargs: Mapping[str, Any] | None = None) -> str:
    """Render messages with the tokenizer's own chat template (the one renderer for all families).

    ``template_kwargs`` are passed to the template (default :data:`THINKING_OFF`; ``{}`` passes
    nothing). Templates without a system role (ones that raise on it, like Gemma's or old Mistral's, or
    that silently drop it) get the system message merged into the first user message.
    """
    extra = dict(THINKING_OFF if template_kwargs is None else template_kwargs)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"{type(tokenizer).__name__} has no chat template; set tokenizer.chat_template (or load a "
            "chat/instruct model) before rendering prompts"
        )

    def apply(msgs: list[dict[str, str]]) -> str:
        return tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
        )

    has_system = bool(messages) and messages[0]["role"] == "system"
    if not has_system:
        return apply(messages)
    system = messages[0]["content"]
    first_error: Exception | None
    try:
        text = apply(messages)
    except Exception as err:  # jinja2 TemplateError from raise_exception, or similar
        first_error = err
    else:
        if not system.strip() or system.strip() in text:
            return text
        first_error = None  # the template silently dropped the system message
    try:
        return apply(_merge_system(messages))
    except Exception as err:
        raise err from first_error
