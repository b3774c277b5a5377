"""distill/ against a real OpenAI-compatible server: llama.cpp (``llama-cpp-python[server]``)
serving the embedded SmolLM2-135M GGUF on 127.0.0.1, started here. No fake responses.

The teacher runs the few-shot prompts (the 135M model answers them in format; the compact ones
it does not) with short answers over the first sample dialogue. The server keeps the KV state
of recent prompts, so each stage's few-shot prefix is computed once per server: the module takes
about two minutes on two busy CPU cores, most of it the first run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from helpers import SAMPLE, check_export

from vista_distill.backends.openai_compat import OpenAIBackend, OpenAISettings
from vista_distill.pipeline.protocol import Fields, Request
from vista_distill.pipeline.templates import get_template, stage_request
from vista_distill.testing.llama_server import MODEL_ALIAS, LlamaServer, free_port

pytestmark = [pytest.mark.server, pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: install the server extra (CMAKE_ARGS=... pip install -e '.[server]') "
           "to run the distill tests against a real OpenAI-compatible server")]

KEY_ENV = "VISTA_DISTILL_TEST_KEY"
API_KEY = "sk-test-" + secrets.token_hex(12)
CONCURRENCY = 4


def recipe(tmp: Path, out: Path, base_url: str, **sections) -> Path:
    r = {
        "name": "test-openai",
        "teacher": {"backend": "openai", "model": MODEL_ALIAS, "base_url": base_url, "api_key_env": KEY_ENV,
                    "prompt_style": "fewshot", "concurrency": CONCURRENCY, "timeout_s": 60, "max_retries": 2,
                    "retry_backoff_s": 0.2, "retry_backoff_max_s": 1.0,
                    "max_new_tokens": {"stage1": 48, "stage2": 6, "stage3": 20}},
        "data": {"train": [{"benchmark": "vista-human", "source": str(SAMPLE)}]},
        "distill": {"output_dir": str(out), "validation_fraction": 0.34},
    }
    for section, values in sections.items():
        r[section].update(values)
    path = tmp / f"recipe-{secrets.token_hex(3)}.yaml"
    path.write_text(yaml.safe_dump(r))
    return path


LIMIT = ("--limit", "1")


def command(config: Path, *extra: str, progress: bool = False) -> list[str]:
    extra = extra or LIMIT
    return [sys.executable, "-m", "vista_distill", "distill", "--config", str(config),
            *([] if progress else ["--no-progress"]), *extra]


def run(config: Path, *extra: str, env: dict | None = None, progress: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(command(config, *extra, progress=progress), capture_output=True, text=True, timeout=600,
                          env={**os.environ, KEY_ENV: API_KEY, **(env or {})})


def entries(out: Path) -> int:
    return sum(1 for _ in (out / "calls").glob("??/*.json"))


def runs(out: Path) -> list[dict]:
    path = out / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def seed_cache(reference: dict, out: Path) -> None:
    """Start ``out`` with the reference run's call cache (same server, model and prompts: valid hits)."""
    shutil.copytree(reference["out"] / "calls", out / "calls")


def wait_settled(server: LlamaServer, quiet_s: float = 1.5, limit_s: float = 60) -> int:
    """The server's answered count once it stops changing (requests of a killed client still finish)."""
    last, since, deadline = server.served(), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = server.served()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(api_key=API_KEY, log_path=log) as s:
        yield s


@pytest.fixture(scope="module")
def reference(server, tmp_path_factory):
    """One uninterrupted run (with the live progress bar): the export every other run must reproduce."""
    tmp = tmp_path_factory.mktemp("reference")
    out = tmp / "silver"
    before = server.served()
    r = run(recipe(tmp, out, server.base_url), progress=True)
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = check_export(out)
    return {"out": out, "manifest": manifest, "calls": entries(out), "served": wait_settled(server) - before,
            "stdout": r.stdout, "stderr": r.stderr}


def test_uninterrupted_run_exports_the_contract(reference):
    out, manifest = reference["out"], reference["manifest"]
    assert manifest["teacher"] == f"openai:{MODEL_ALIAS}"
    last = runs(out)[-1]
    assert last["status"] == "completed" and last["cache_hits"] == 0
    assert last["calls"] == reference["calls"] == reference["served"] > 0
    assert last["cache_overwrites"] == 0
    # the live bar: calls, cache hits, parse failures, requests per second
    assert "cache hits" in reference["stderr"] and "parse failures" in reference["stderr"]
    assert "req/s" in reference["stderr"]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    rep = manifest["filters"]["report"]
    assert len(records) == sum(rep[s]["candidates"] for s in rep)
    assert all(r["cache_key"] and r["latency_s"] is not None for r in records)
    assert {r["teacher"] for r in records} == {manifest["teacher"]}
    for r in records:
        assert (r["parse_status"] == "failed") == (r["drop_reason"] == "parse failure")
    kept = {(r["stage"], r["conversation_id"], r["turn_index"], r["claim_index"]) for r in records if r["kept"]}
    assert len(kept) == sum(rep[s]["kept"] for s in rep)


def test_api_key_is_sent_but_never_written_or_printed(reference, server, tmp_path):
    text = reference["stdout"] + reference["stderr"]
    for path in reference["out"].rglob("*"):
        if path.is_file():
            text += path.read_bytes().decode("utf-8", errors="replace")
    assert API_KEY not in text
    # The server demands the key: a wrong one is refused with an error naming the variable, not the value.
    r = run(recipe(tmp_path, tmp_path / "silver", server.base_url), env={KEY_ENV: "wrong-key"})
    assert r.returncode == 3, r.stderr[-2000:]   # a server that refuses (runtime/exit_codes.py)
    assert "API key was refused" in r.stderr and KEY_ENV in r.stderr
    assert "wrong-key" not in r.stderr + r.stdout and API_KEY not in r.stderr + r.stdout


def test_sigkill_at_several_points_then_resume(reference, server, tmp_path):
    out = tmp_path / "silver"
    config = recipe(tmp_path, out, server.base_url)
    n = reference["calls"]
    env = {**os.environ, KEY_ENV: API_KEY}
    served0 = server.served()
    kills = []
    for target in (max(1, n // 6), n // 2, (3 * n) // 4):
        before = entries(out) if out.exists() else 0
        proc = subprocess.Popen(command(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        deadline = time.monotonic() + 300
        while (entries(out) if out.exists() else 0) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills.append({"at_entries": entries(out), "new_entries": entries(out) - before})
    # One more kill in the export phase, after every call is done.
    r = run(config, env={"VISTA_DISTILL_DIE_AT": "export:stage2"})
    assert r.returncode == -signal.SIGKILL
    assert entries(out) == n
    export_kill_calls = n - kills[-1]["at_entries"]
    r = run(config)
    assert r.returncode == 0, r.stderr[-3000:]
    served = wait_settled(server) - served0
    final = runs(out)[-1]
    manifest = json.loads((out / "manifest.json").read_text())
    print(f"\nSIGKILL demo: uninterrupted run = {n} calls; kills at cache entries "
          f"{[k['at_entries'] for k in kills]} + one during export; final run: {final['requests']} requests, "
          f"{final['cache_hits']} cache hits, {final['calls']} new calls; cache entries {entries(out)}; "
          f"server answered {served} (= {n} + {served - n} in flight when killed)")
    assert manifest["fingerprint"] == reference["manifest"]["fingerprint"]
    assert final["calls"] == 0 and final["cache_hits"] == final["requests"]
    assert entries(out) == n
    # No completed call was sent again: the only extra server work is what was in flight at each kill.
    assert n <= served <= n + CONCURRENCY * len(kills), (served, n)
    assert export_kill_calls >= 0


def test_server_killed_mid_run_stops_resumably(tmp_path):
    # Its own server, killed mid-run; compact prompts (no few-shot prefix to recompute on a cold server).
    port = free_port()
    out = tmp_path / "silver"
    log = tmp_path / "server.log"
    config = recipe(tmp_path, out, f"http://127.0.0.1:{port}/v1", teacher={"prompt_style": "compact"})
    env = {**os.environ, KEY_ENV: API_KEY}
    with LlamaServer(port=port, api_key=API_KEY, log_path=log) as srv:
        proc = subprocess.Popen(command(config, "--limit", "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        deadline = time.monotonic() + 300
        while (entries(out) if out.exists() else 0) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before the server could be killed"
        srv.kill()
        killed_at = time.monotonic()
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr[-3000:]
    assert time.monotonic() - killed_at < 60
    assert "stopped:" in stderr and "rerun the same command to resume" in stderr and "Traceback" not in stderr
    assert "retry 1/2" in stderr and "retry 2/2" in stderr   # backoff retries, logged as warnings
    stopped = runs(out)[-1]
    assert stopped["status"] == "stopped" and stopped["retries"] >= 2
    cached = entries(out)
    # Server still down: the resumed run says so clearly.
    r = run(config, "--limit", "1")
    assert r.returncode == 3 and "cannot reach the teacher server" in r.stderr and "Traceback" not in r.stderr
    with LlamaServer(port=port, api_key=API_KEY, log_path=log):
        r = run(config, "--limit", "1")
        assert r.returncode == 0, r.stderr[-3000:]
        resumed = runs(out)[-1]
        # The same recipe, uninterrupted, against the same server: the export must be the same.
        ref = run(recipe(tmp_path, tmp_path / "uninterrupted", f"http://127.0.0.1:{port}/v1",
                         teacher={"prompt_style": "compact"}), "--limit", "1")
        assert ref.returncode == 0, ref.stderr[-3000:]
    n = entries(tmp_path / "uninterrupted")
    assert resumed["cache_hits"] == cached and resumed["calls"] == n - cached and entries(out) == n
    fingerprint = json.loads((out / "manifest.json").read_text())["fingerprint"]
    assert fingerprint == json.loads((tmp_path / "uninterrupted" / "manifest.json").read_text())["fingerprint"]


def test_malformed_output_is_a_parse_failure_left_out(reference, server, tmp_path):
    # One token is not enough for a stage 2 label: every answer is cut off, as a real server returns it.
    out = tmp_path / "silver"
    seed_cache(reference, out)   # stage 1 answers are the reference's: only the stage 2 calls are new
    config = recipe(tmp_path, out, server.base_url,
                    teacher={"max_new_tokens": {"stage1": 48, "stage2": 1, "stage3": 20}})
    r = run(config)
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = check_export(out)
    rep = manifest["filters"]["report"]["stage2"]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    failed = [x for x in records if x["stage"] == "stage2" and x["parse_status"] == "failed"]
    assert failed and rep["dropped"]["parse failure"] == len(failed)
    # each cut answer was asked once more with twice the budget before it counted as a failure
    assert all(x["finish_reason"] == "length" and x["retry"]["budget"] == 2 for x in failed)
    assert all("label" in x["error"] or "empty output" in x["error"] for x in failed)
    assert all(not x["kept"] for x in failed)
    exported = sum(manifest["counts"]["stage2"][s]["examples"] for s in ("train", "validation"))
    assert exported == rep["kept"] == rep["candidates"] - sum(rep["dropped"].values())


def test_decomposition_cut_at_its_budget_is_retried_then_flagged_and_kept_out(server, tmp_path):
    """The real server stops at max_tokens with finish_reason "length": the engine asks once more with twice
    the budget; a list still cut loses its last line (counted), the turn is flagged, and its stage 1 example
    is not exported (an incomplete list would teach the student to leave claims out)."""
    out = tmp_path / "silver"
    config = recipe(
        tmp_path, out, server.base_url, teacher={"max_new_tokens": {"stage1": 10, "stage2": 6, "stage3": 20}}
    )
    r = run(config)
    assert r.returncode == 0, r.stderr[-3000:]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    stage1 = [x for x in records if x["stage"] == "stage1"]
    retried = [x for x in stage1 if x["retry"]]
    assert retried and all(x["retry"]["budget"] == 20 and "cut at its budget of 10" in x["retry"]["reason"]
                           for x in retried)
    cut = [x for x in stage1 if x["finish_reason"] == "length"]
    assert all(x in retried for x in cut) and all(not x["kept"] for x in cut)
    assert all(x["drop_reason"] in ("truncated", "parse failure") for x in cut)
    last = runs(out)[-1]
    assert last["stage1_truncated_turns"] == len(cut) > 0
    assert last["claims_dropped"].get("truncated_line", 0) >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    dropped = manifest["filters"]["report"]["stage1"]["dropped"]
    assert dropped.get("truncated", 0) + dropped.get("parse failure", 0) >= len(cut)
    assert "answer(s) still cut at the token budget after a retry" in r.stdout


def test_self_consistency_votes_over_k_samples(reference, server, tmp_path):
    out = tmp_path / "silver"
    seed_cache(reference, out)   # sample 0 is the greedy call: the reference's; only sample 1 is new
    k = 2                        # enough to exercise the votes; k=3+ only costs more calls
    config = recipe(
        tmp_path,
        out,
        server.base_url,
        distill={
            "self_consistency_k": k,
            "self_consistency_min_agreement": 0.75,
            "validation_fraction": 0.0,
            "filter_gold_agreement": False,
        },
    )
    r = run(config, "--limit", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = check_export(out)
    assert manifest["teacher_config"]["self_consistency"]["k"] == k
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    voted = [x for x in records if x["stage"] in ("stage2", "stage3") and x["parse_status"] == "ok"]
    assert voted and all(len(x["votes"]) == k and x["agreement"] is not None for x in voted)
    for x in voted:
        assert x["votes"][0] == x["parsed"]["label"]   # the greedy answer is the one kept
        assert x["agreement"] == pytest.approx(x["votes"].count(x["parsed"]["label"]) / k)
        assert (x["drop_reason"] == "self-consistency") == (x["agreement"] < 0.75)
    last = runs(out)[-1]
    n_voted = sum(1 for x in records if x["stage"] in ("stage2", "stage3"))
    # a request cut at its budget is asked again with twice the budget (engine.run_requests): its
    # greedy answer is in the reference's cache too, its sample is a new call
    n_retried = sum(1 for x in records if x["stage"] in ("stage2", "stage3") and x["retry"])
    assert last["calls"] <= (k - 1) * (n_voted + n_retried) and last["cache_hits"] >= n_voted


class FaultProxy:
    """A real HTTP proxy in front of the server that answers the first chat requests with the given
    status codes (429 with Retry-After, 503, ...) and forwards everything else."""

    def __init__(self, upstream: str, faults: list[int]) -> None:
        self.upstream, self.faults, self.statuses = upstream.rstrip("/"), list(faults), []

    def __enter__(self) -> FaultProxy:
        import httpx

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self.forward("GET")

            def do_POST(self) -> None:
                self.forward("POST")

            def reply(self, code: int, body: bytes, extra: dict) -> None:
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **extra}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if method == "POST" and proxy.faults:
                    code = proxy.faults.pop(0)
                    proxy.statuses.append(code)
                    self.reply(code, b'{"error": {"message": "busy"}}', {"Retry-After": "0"})
                    return
                headers = {"Content-Type": "application/json"}
                if self.headers.get("Authorization"):
                    headers["Authorization"] = self.headers["Authorization"]
                r = httpx.request(method, proxy.upstream + self.path.removeprefix("/v1"), content=body,
                                  headers=headers, timeout=120)
                if method == "POST":
                    proxy.statuses.append(r.status_code)
                self.reply(r.status_code, r.content, {})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_429_and_503_are_retried_and_a_400_fails_only_its_request(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, API_KEY)
    template = get_template("stage2", "compact")
    ok = stage_request(template, Fields(reference="Paris is in France.", claim="Paris is in France."), max_new_tokens=6)
    too_long = Request("stage2", ({"role": "user", "content": "word " * 5000},), max_new_tokens=4)
    with FaultProxy(server.base_url, [429, 503]) as proxy:
        settings = OpenAISettings(api_key_env=KEY_ENV, concurrency=1, max_retries=3, retry_backoff_s=0.05,
                                  retry_backoff_max_s=0.2)
        backend = OpenAIBackend(MODEL_ALIAS, proxy.base_url, settings)
        a, b = backend.run([ok, too_long])
    assert proxy.statuses == [429, 503, 200, 400]
    assert a.text and a.meta["attempts"] == 3 and "error" not in a.meta
    assert b.text == "" and b.meta["error"].startswith("HTTP 400") and "context length" in b.meta["error"]
    assert backend.stats["retries"] == 2 and backend.stats["calls"] == 1 and backend.stats["failures"] == 1
