"""Reasoning teachers and students: thinking off by default, think blocks kept but never parsed as answers,
cut or empty answers retried once and then recorded as failures, ``check`` catching thinking left on.

A real reasoning model cannot run here, so the OpenAI-compatible side is an HTTP server on 127.0.0.1 that
answers the way vLLM serving Qwen3 does: with ``chat_template_kwargs: {enable_thinking: false}`` a direct
answer, otherwise an opening ``<think>`` block that runs into ``max_tokens`` (``finish_reason: length``).
The local side renders Qwen3's real chat template.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import ROOT, SAMPLE, TEMPLATES

from vista_distill.backends.openai_compat import OpenAIBackend, OpenAISettings
from vista_distill.config import load_recipe
from vista_distill.data.io import read_conversations
from vista_distill.pipeline.engine import run_requests, splitter_claims
from vista_distill.pipeline.protocol import Request
from vista_distill.pipeline.render import render
from vista_distill.pipeline.templates import build_messages, get_template, stage2_input
from vista_distill.scorer import VistaScorer


class ReasoningServer:
    """Answers like a Qwen3 server: thinks (and runs out of tokens) unless told enable_thinking=false."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def __enter__(self) -> ReasoningServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self.reply({"object": "list", "data": [{"id": "Qwen/Qwen3-32B", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
                prompt = body["messages"][-1]["content"]
                if thinking:
                    words = ["<think>", "Okay,", "let", "me", "look", "at", "the", "claim", "first."] * 40
                    content, finish = " ".join(words[: body["max_tokens"]]), "length"
                elif "claim:" in prompt.lower():
                    content, finish = "VERIFIED", "stop"
                else:
                    content, finish = "1. The user likes tea.\n2. Tea comes from China.", "stop"
                self.reply({"choices": [{"index": 0, "finish_reason": finish,
                                         "message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": body["max_tokens"]}})

            def reply(self, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()


@pytest.fixture()
def server():
    with ReasoningServer() as s:
        yield s


def stage2_request(max_new_tokens: int = 8) -> Request:
    msgs = build_messages(
        get_template("stage2", "fewshot"), stage2_input([], "Tea comes from China.", "Tea is Chinese.")
    )
    return Request("stage2", tuple(msgs), max_new_tokens=max_new_tokens)


def test_thinking_is_off_by_default_in_requests(server):
    backend = OpenAIBackend("Qwen/Qwen3-32B", server.base_url,
                            OpenAISettings(chat_template_kwargs={"enable_thinking": False}))
    (answer,) = run_requests(backend, [stage2_request()])
    assert answer.text == "VERIFIED" and answer.meta["finish_reason"] == "stop" and "retry" not in answer.meta
    assert server.bodies[-1]["chat_template_kwargs"] == {"enable_thinking": False}
    # the recipe default is the same switch
    assert load_recipe(ROOT / "recipes" / "qwen3-8b-qlora-24gb.yaml").teacher.chat_template_kwargs == {
        "enable_thinking": False}


def test_thinking_left_on_is_retried_once_then_a_recorded_failure_never_silently_empty(server):
    backend = OpenAIBackend("Qwen/Qwen3-32B", server.base_url, OpenAISettings(chat_template_kwargs={}))
    (answer,) = run_requests(backend, [stage2_request(8)])
    assert [b["max_tokens"] for b in server.bodies] == [8, 16]          # asked once more with twice the budget
    assert "chat_template_kwargs" not in server.bodies[0]
    assert answer.text == "" and answer.meta["think"].startswith("Okay, let me")   # the thoughts are kept
    assert answer.meta["raw"].startswith("<think>")
    assert answer.meta["retry"]["budget"] == 16 and answer.meta["retry"]["failed"]
    assert "after a retry" in answer.meta["error"]

    conv = read_conversations(SAMPLE)[:1]
    result = VistaScorer(backend=backend, stage2="generate", stage3="generate").score(conv)
    turn = result.records[0]
    # stage 1 came back as an unfinished think block: no claims of its own, so the turn's sentences are its claims,
    # and the record says both; stage 2 thinks too, so no claim gets a label and the turn is unknown with the reason
    assert turn["stage1_fallback"] and turn["stage1_truncated"] and turn["verdicts"]["safe"] == "unknown"
    assert [c["text"] for c in turn["claims"]] == splitter_claims(turn["text"])
    assert all(c["category"] is None and c["error"] for c in turn["claims"])
    assert turn["stage1_raw"].startswith("<think>") and turn["stage1_think"]
    assert result.summary["stage1_truncated_turns"] == len(result.records)


def test_local_rendering_switches_qwen3_thinking_off():
    from transformers import AutoTokenizer

    from vista_distill.backends.model_loading import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(None))
    tok.chat_template = (TEMPLATES / "qwen3.jinja").read_text()
    msgs = build_messages(get_template("stage2", "compact"), stage2_input([], "Ref.", "Claim."))
    assert render(tok, msgs).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert render(tok, msgs, template_kwargs={}).endswith("<|im_start|>assistant\n")   # thinking on: model opens it


def test_check_flags_a_reasoning_teacher_with_thinking_on(server, tmp_path, monkeypatch):
    from vista_distill.check.recipe_checks import run_checks

    monkeypatch.setenv("VISTA_DISTILL_DATA", str(tmp_path))   # no data here: only the thinking lines matter
    recipe = load_recipe(ROOT / "recipes" / "qwen3-8b-qlora-24gb.yaml",
                         ["teacher.chat_template_kwargs={}", f"teacher.base_url={server.base_url}"])
    report = run_checks(recipe, online=True, emit=lambda _line: None)
    assert any("reasoning model" in p and "teacher.chat_template_kwargs" in p for p in report.problems)
    assert any("still thinks" in p for p in report.problems)        # --online: the endpoint really answers so
    ok = load_recipe(ROOT / "recipes" / "qwen3-8b-qlora-24gb.yaml", [f"teacher.base_url={server.base_url}"])
    report = run_checks(ok, online=True, emit=lambda _line: None)
    assert [p for p in report.problems if "data source" not in p] == []
    assert any("answered 'VERIFIED'" in line for line in report.lines)
