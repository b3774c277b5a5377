"""Tokenisation of training examples: the student trains on exactly what the scorer feeds it.

The prompt is encoded by :func:`vista_distill.backends.model_loading.encode_prompt`, the function
``TransformersBackend`` scores with (the student's own chat template, generation prompt, no special
tokens added); the completion is the answer's tokens plus the template's end-of-turn token
(``<|im_end|>``, ``<|eot_id|>``, ``</s>``...), so the student learns to stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..backends.model_loading import encode_prompt, text_ids
from .silver_data import TrainError, answer_text

# End-of-turn tokens of common chat templates, tried when the template's own token is not special.
KNOWN_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>", "<|endoftext|>")
_MARKER = "@@VISTA_ANSWER@@"


def end_of_turn(tokenizer: Any) -> tuple[str, int]:
    """The token the chat template closes an assistant message with: ``(token, id)``.

    Found by rendering a probe answer; the first special (or known end-of-turn) token after it wins,
    else the tokenizer's EOS.
    """
    from ..pipeline.render import render

    probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
             {"role": "assistant", "content": _MARKER}]
    try:
        text = render(tokenizer, probe, add_generation_prompt=False)
    except Exception:  # noqa: BLE001 - templates that insist on alternation etc.: fall back to EOS below
        text = ""
    after = text[text.rfind(_MARKER) + len(_MARKER):] if _MARKER in text else ""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = tokenizer.get_vocab()
    known = {vocab[t] for t in KNOWN_END_TOKENS if t in vocab}
    for tid in text_ids(tokenizer, after) if after else []:
        if tid in special or tid in known:
            return tokenizer.convert_ids_to_tokens(tid), int(tid)
    if tokenizer.eos_token_id is None:
        name = getattr(tokenizer, "name_or_path", "tokenizer")
        raise TrainError(f"{name}: no end-of-turn token in the chat "
                         "template and no eos_token: the student could not learn to stop")
    return tokenizer.eos_token, int(tokenizer.eos_token_id)


def encode_example(tokenizer: Any, prompt: list[dict[str, str]], completion: Any,
                   eot_id: int, template_kwargs: Mapping[str, Any] | None = None) -> dict[str, list[int]]:
    """``input_ids`` and ``completion_mask`` of one example.

    Prompt ids are what ``TransformersBackend`` feeds the model (:func:`encode_prompt`); completion ids
    are the stripped answer tokenized on its own (as label scoring does) plus ``eot_id``.
    """
    _, prompt_ids = encode_prompt(tokenizer, prompt, template_kwargs)
    answer = answer_text(completion)
    if answer is None:
        raise TrainError(f"completion {completion!r}: expected [{{'role': 'assistant', 'content': ...}}]")
    completion_ids = text_ids(tokenizer, answer.strip()) + [eot_id]
    return {"input_ids": prompt_ids + completion_ids,
            "completion_mask": [0] * len(prompt_ids) + [1] * len(completion_ids)}


def encode_split(ds, tokenizer: Any, eot_id: int, max_length: int | None,
                 weights: Mapping[str, float] | None = None, template_kwargs: Mapping[str, Any] | None = None):
    """Tokenize a split; drop examples over ``max_length``. Returns ``(dataset, n_dropped)``.

    The result keeps ``input_ids``, ``completion_mask`` and ``label`` (plus ``class_weight`` when
    ``weights`` is given), in memory: the silver folder is never written to.
    """
    def fn(row: dict[str, Any]) -> dict[str, Any]:
        out = encode_example(tokenizer, row["prompt"], row["completion"], eot_id, template_kwargs)
        if weights is not None:
            out["class_weight"] = float(weights[row["label"]])
        return out

    drop = [c for c in ds.column_names if c != "label"]
    encoded = ds.map(fn, remove_columns=drop, keep_in_memory=True, desc="Tokenizing")
    n = len(encoded)
    if max_length is not None:
        encoded = encoded.filter(lambda r: len(r["input_ids"]) <= max_length, keep_in_memory=True)
    return encoded, n - len(encoded)
