"""A real OpenAI-compatible server started on 127.0.0.1 in its own process group, for tests, benchmarks and smoke
runs: started by a command, ready once ``/v1/models`` answers, stopped with SIGTERM (SIGKILL after 10 s), or killed
outright to stand in for a crash. :class:`~.llama_server.LlamaServer` and :class:`~.vllm_server.VllmServer` say
which command."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackServer:
    """A server subprocess on ``127.0.0.1:port``; its output goes to ``log_path`` (or nowhere)."""

    engine = "server"

    def __init__(self, port: int | None = None, api_key: str | None = None,
                 log_path: str | os.PathLike | None = None, startup_timeout_s: float = 120.0) -> None:
        self.port = port or free_port()
        self.api_key = api_key
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> tuple[list[str], Mapping[str, str]]:
        """The command line and the extra environment that start the server."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """Remove what :meth:`command` wrote (after the server stopped)."""

    def start(self):
        import httpx

        cmd, extra_env = self.command()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}   # access-log lines reach the log as they happen
        self._log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=env)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"{self.engine} exited with code {code} at start"
                                   + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                if httpx.get(f"{self.base_url}/models", headers=headers, timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.engine} did not answer on {self.base_url} within {self.startup_timeout_s:.0f}s"
                           + (f"; see {self.log_path}" if self.log_path else ""))

    def served(self) -> int:
        """Completions the server has answered so far (from its access log; needs ``log_path``)."""
        if self.log_path is None or not self.log_path.exists():
            return 0
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return text.count('"POST /v1/chat/completions HTTP/1.1" 200') + text.count(
            '"POST /v1/completions HTTP/1.1" 200'
        )

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash, as far as clients can tell)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None:
            try:   # workers the engine started in the group (vLLM's engine core) go with it
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None
        self.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
