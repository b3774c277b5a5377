"""A server that fails mid-run ends ``vista-distill score`` with one line naming the role and the server, no
traceback. The server is a real HTTP server on 127.0.0.1 that lists the student's models and then answers every
completion with HTTP 500 (what an engine that died behind its front end returns)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers import SAMPLE


class _Failing(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"data": [{"id": m} for m in ("base", "stage1", "stage2", "stage3")]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(500, {"error": {"message": "EngineDeadError: the engine loop has stopped"}})


def test_a_student_server_failing_mid_run_ends_in_one_line(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vista_distill", "score", "--input", str(SAMPLE), "--output",
             str(tmp_path / "out.jsonl"), "--limit", "1", "--server", url, "--no-evidence",
             "student.serving.max_retries=1", "student.serving.retry_backoff_s=0.05",
             "student.serving.retry_backoff_max_s=0.1"],
            capture_output=True, text=True, timeout=300)
    finally:
        httpd.shutdown()
    assert proc.returncode == 3, proc.stderr[-3000:]   # a server that refuses (runtime/exit_codes.py)
    assert "Traceback" not in proc.stderr
    last = [line for line in proc.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: student server failed") and f"127.0.0.1:{httpd.server_address[1]}" in last
    assert "HTTP 500" in last and "EngineDeadError" in last   # what failed, as the server said it
    assert "rerun the same command to resume (score and eval keep what had finished)" in last   # no call cache here
    assert not (tmp_path / "out.jsonl").exists()


def test_server_backend_settings_and_served_names_are_checked_before_any_request():
    """A served student's settings are refused by name at construction, and a replica that does not serve every
    stage's adapter is refused naming what it serves (llama.cpp would answer a missing name with its base model)."""
    import pytest

    from vista_distill.backends.openai_compat import ServerError
    from vista_distill.backends.server import ServedAdapters, ServerBackend, ServingSettings

    url = "http://127.0.0.1:9/v1"
    with pytest.raises(ServerError, match=r"student: label_scoring must be one of .*got 'bogus'"):
        ServerBackend(None, url, ServingSettings(label_scoring="bogus"))
    with pytest.raises(ServerError, match=r"server model names for unknown stages \['stage9'\]"):
        ServerBackend(None, url, adapters=ServedAdapters({"stage9": "x"}))
    backend = ServerBackend(None, url, adapters=ServedAdapters({"stage2": "stage2", "stage3": "stage3"}))
    backend.check_models(url, ["base", "stage2", "stage3"])   # all there
    backend.check_models(url, [])                               # a server that lists no models: nothing to check
    with pytest.raises(ServerError, match=r"does not serve \['stage3'\] \(it serves \['base', 'stage2'\]\)"):
        backend.check_models(url, ["base", "stage2"])
