"""The teacher's call cache: unreadable entries are counted misses, and a local teacher's key follows
its weights and chat template (real files: a tiny random Llama saved with the embedded tokenizer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vista_distill.backends.cache import CallCache, call_key
from vista_distill.backends.fingerprint import file_digest, folder_digest
from vista_distill.backends.human_labels import LabelsBackend
from vista_distill.backends.teacher import build_teacher
from vista_distill.backends.wrappers import CachedBackend
from vista_distill.config import load_recipe
from vista_distill.data.io import read_conversations
from vista_distill.pipeline.protocol import Fields, Request
from vista_distill.pipeline.templates import get_template, stage_request

REQUEST = Request("stage2", ({"role": "user", "content": "CLAIM:\nThe Eiffel Tower is in Paris."},), max_new_tokens=8)

# -- unreadable entries --------------------------------------------------------------------------------

GOOD = {"text": "VERIFIED", "label": "VERIFIED", "probs": {"VERIFIED": 0.9, "UNVERIFIABLE": 0.1},
        "prompt_tokens": 12, "completion_tokens": 1, "latency_s": 0.5}


def _corruptions(key: str) -> dict[str, bytes]:
    whole = json.dumps({**GOOD, "key": key}).encode()
    as_json = {
        "a list": [GOOD], "a string": "VERIFIED", "a number": 3, "null": None,
        "no text": {k: v for k, v in {**GOOD, "key": key}.items() if k != "text"},
        "no key": GOOD,
        "another key": {**GOOD, "key": "0" * 64},
        "text not a string": {**GOOD, "key": key, "text": 5},
        "tokens a string": {**GOOD, "key": key, "prompt_tokens": "12"},
        "tokens a bool": {**GOOD, "key": key, "completion_tokens": True},
        "label a list": {**GOOD, "key": key, "label": ["VERIFIED"]},
        "probs a string": {**GOOD, "key": key, "probs": "high"},
        "probs not numbers": {**GOOD, "key": key, "probs": {"VERIFIED": "high"}},
        "latency a dict": {**GOOD, "key": key, "latency_s": {}},
    }
    return {
        "truncated": whole[: len(whole) // 2], "empty": b"", "not JSON": b"VERIFIED", "not UTF-8": b"\xff\xfe{",
        **{name: json.dumps(value).encode() for name, value in as_json.items()},
    }


def test_every_kind_of_unreadable_entry_is_a_counted_miss(tmp_path):
    cache = CallCache(tmp_path / "calls")
    key = call_key({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    cache.put(key, GOOD)
    assert cache.get(key)["text"] == "VERIFIED"
    kinds = _corruptions(key)
    for n, (name, data) in enumerate(kinds.items(), 1):
        cache.path(key).write_bytes(data)
        assert cache.get(key) is None, name
        assert cache.stats["unreadable"] == n, name
    assert cache.stats == {"hits": 1, "misses": len(kinds), "writes": 1, "overwrites": 0, "unreadable": len(kinds)}
    cache.put(key, {**GOOD, "label": None, "probs": None, "latency_s": None})   # nulls where a backend writes them
    assert cache.get(key)["label"] is None and cache.stats["hits"] == 2


def test_cached_backend_asks_again_for_an_unreadable_entry_and_rewrites_it(tmp_path, sample_path):
    sample = read_conversations(sample_path)
    cache = CallCache(tmp_path / "calls")
    backend = CachedBackend(LabelsBackend(sample), cache, {"backend": "labels"})
    turn = sample[0].turns[1]
    req = stage_request(get_template("stage2", "compact"), Fields(claim=turn.gold_claims[0].text,
                                                                  reference=turn.reference),
                        labels=("VERIFIED", "UNVERIFIABLE"))
    [first] = backend.run([req])
    key = backend.key(req)
    cache.path(key).write_text('["not", "an", "entry"]')
    [again] = backend.run([req])          # no AttributeError: a miss, answered by the teacher again
    assert again.label == first.label == "VERIFIED" and again.meta["cached"] is False
    assert backend.stats["calls"] == 2 and cache.stats["unreadable"] == 1 and cache.stats["overwrites"] == 1
    [third] = backend.run([req])
    assert third.meta["cached"] is True and third.label == "VERIFIED"


# -- local teacher keys --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedded_tokenizer():
    from transformers import AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


def _save_model(folder: Path, seed: int, tokenizer) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.fixture
def model_dir(tmp_path, embedded_tokenizer):
    folder = tmp_path / "tiny"
    _save_model(folder, 0, embedded_tokenizer)
    return folder


def _teacher(model: str | Path | None, tmp: Path):
    over = ["teacher.backend=transformers", "teacher.dtype=float32"] + ([f"teacher.model={model}"] if model else [])
    return build_teacher(load_recipe(None, over), [], CallCache(tmp / "calls")).core


def test_local_key_follows_weights_and_chat_template(tmp_path, model_dir, embedded_tokenizer):
    t = _teacher(model_dir, tmp_path)
    key = t.key(REQUEST)
    assert t.identity["files"] == folder_digest(model_dir) and len(t.identity["chat_template"]) == 64
    assert (model_dir / "model.safetensors").stat().st_size > 2 << 20   # the sampled path of file_digest
    assert _teacher(model_dir, tmp_path).key(REQUEST) == key            # same files, same key
    copy = shutil.copytree(model_dir, tmp_path / "copy")                 # new paths and times, same content
    assert _teacher(copy, tmp_path).key(REQUEST) == key
    shutil.copytree(model_dir, tmp_path / "copy0")

    _save_model(model_dir, 1, embedded_tokenizer)                        # other weights, same sizes
    retrained = _teacher(model_dir, tmp_path)
    assert retrained.key(REQUEST) != key
    assert retrained.identity["chat_template"] == t.identity["chat_template"]

    tok = type(embedded_tokenizer).from_pretrained(copy)
    tok.chat_template = tok.chat_template.replace("<|im_start|>", "<|im_start|> ")
    tok.save_pretrained(copy)                                            # same weights, another template
    templated = _teacher(copy, tmp_path)
    assert file_digest(copy / "model.safetensors") == file_digest(tmp_path / "copy0" / "model.safetensors")
    assert templated.identity["chat_template"] != t.identity["chat_template"] and templated.key(REQUEST) != key


def test_one_byte_at_either_end_of_a_large_file_changes_its_digest(tmp_path):
    data = bytearray(range(256)) * (5 * 4096)   # 5 MiB
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    a.write_bytes(data)
    b.write_bytes(data)
    assert file_digest(a) == file_digest(b)
    for where in (0, len(data) - 1):
        changed = bytearray(data)
        changed[where] ^= 1
        b.write_bytes(changed)
        assert file_digest(b) != file_digest(a), where
    b.write_bytes(data + b"\0")
    assert file_digest(b) != file_digest(a)


def test_hub_id_not_on_disk_is_keyed_by_id_and_revision(tmp_path):
    t = _teacher("vista-distill-tests/no-such-model", tmp_path)
    assert t.identity["model"] == "vista-distill-tests/no-such-model" and t.identity["revision"] == "main"
    assert "files" not in t.identity and "chat_template" not in t.identity


def test_embedded_model_is_keyed_by_its_cached_copy(tmp_path):
    from vista_distill.backends.model_loading import resolve_model

    t = _teacher(None, tmp_path)
    assert t.identity["model"] == "embedded:SmolLM2-135M"
    assert t.identity["files"] == folder_digest(resolve_model(None))
