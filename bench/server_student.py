"""python bench/server_student.py --adapters DIR --input DIALOGUES [--engine vllm|llama_cpp] [--limit N]
    [--claims model|gold] [--dtype float32|bfloat16] [--threads 2]

The student in process (transformers) against the same adapters on a server (``vista-distill serve-config``'s
files: vLLM's CPU build, or llama.cpp with GGUF LoRA), on the same inputs, one after the other: turns/s, tokens
per turn, and how often claims, labels and verdicts agree.

The adapters' evidence head (``evidence_head.json``, in-process only: servers do not apply it) is left out of
both sides, so they run the same model; the result says whether the adapters had one. Results:
``bench/results/server_student_<cpu>_<engine>_<claims>.json`` and ``.md``, with the CPU, the adapters'
fingerprint, both engines' settings and the load average.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(backend, recipe, convs, claims: str):
    from vista_distill.pipeline.engine import run_programs, vista_program

    cfg = dataclasses.replace(recipe.engine_config("student"), claims=claims)
    before = dict(backend.stats)
    t = time.perf_counter()
    res = run_programs([vista_program(c, cfg) for c in convs], backend, batched=True)
    wall = time.perf_counter() - t
    stats = {k: v - before.get(k, 0) for k, v in backend.stats.items() if isinstance(v, (int, float))}
    return [x.to_dict() for turns in res for x in turns], wall, stats


def agreement(served: list[dict], inproc: list[dict]) -> dict:
    """Turn by turn: the same stage-1 claims, the same category on claims both have, the same verdicts."""
    turns = [(x, y) for x, y in zip(served, inproc) if x["scored"] and y["scored"]]
    same = [(c, d) for x, y in turns for c, d in zip(x["claims"], y["claims"]) if c["text"] == d["text"]]
    n = max(1, len(turns))
    return {
        "turns": len(turns),
        "stage1_claims_identical_turns": sum([c["text"] for c in x["claims"]] == [c["text"] for c in y["claims"]]
                                             for x, y in turns) / n,
        "claims_compared": len(same), "claims_in_process": sum(len(y["claims"]) for _, y in turns),
        "category_same": sum(c["category"] == d["category"] for c, d in same) / max(1, len(same)),
        "stage2_prob_max_abs_diff": max((abs(c["stage2"]["probs"]["VERIFIED"] - d["stage2"]["probs"]["VERIFIED"])
                                         for c, d in same if (c.get("stage2") or {}).get("probs")
                                         and (d.get("stage2") or {}).get("probs")), default=None),
        "verdict_strict_same": sum(x["verdicts"].get("strict") == y["verdicts"].get("strict") for x, y in turns) / n,
        "verdict_safe_same": sum(x["verdicts"].get("safe") == y["verdicts"].get("safe") for x, y in turns) / n,
    }


def report(out: dict) -> str:
    s, i, a = out["server"], out["in_process"], out["agreement"]
    return "\n".join([
        f"# Served student ({out['engine']}) against the in-process student", "",
        f"CPU: {out['cpu']}; {out['date']}; load average at start {out['loadavg_start']:.2f}. Input: "
        f"`{out['input']}`, {out['conversations']} conversations, {a['turns']} scored turns, claims `{out['claims']}`. "
        f"Adapters: `{out['adapters']}` (sha256 prefixes {out['adapters_fingerprint']}; evidence head "
        f"{'present, left out of both sides' if out['evidence_head'] else 'none'}). Command: `{out['command']}`.", "",
        "| side | engine and settings | wall s | turns / s | requests |", "| --- | --- | ---: | ---: | ---: |",
        f"| server | {s['engine']} | {s['wall_s']} | {s['turns_per_s']} | {s.get('requests')} |",
        f"| in process | {i['engine']} | {i['wall_s']} | {i['turns_per_s']} | - |", "",
        f"Label scoring on the server: `{out['label_scoring']}`.", "",
        "| agreement | value |", "| --- | ---: |",
        *(f"| {k} | {v if not isinstance(v, float) else round(v, 4)} |" for k, v in a.items()), ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--engine", choices=("vllm", "llama_cpp"), default="vllm")
    ap.add_argument("--config", default=str(ROOT / "recipes" / "demo-cpu.yaml"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--claims", choices=("model", "gold"), default="model")
    ap.add_argument("--label-scoring", default="auto")
    ap.add_argument("--dtype", default="float32", help="both sides' precision (vLLM; llama.cpp runs its GGUF)")
    ap.add_argument("--threads", type=int, default=2, help="each side's threads (they run one after the other)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    from vista_distill.backends.adapters import find_stage_adapters
    from vista_distill.backends.evidence_head import HEAD_FILE
    from vista_distill.backends.fingerprint import folder_digest
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.config import load_recipe
    from vista_distill.data.io import read_conversations
    from vista_distill.publish.serve_config import write_serve_config
    from vista_distill.runtime.hardware import detect, short_cpu_label

    recipe = load_recipe(a.config, [f"student.serving.label_scoring={a.label_scoring}",
                                    "student.serving.concurrency=4"])
    convs = read_conversations(a.input)[: a.limit]
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    adapters = work / "adapters"    # a copy without the evidence head: both sides run the same model
    shutil.copytree(a.adapters, adapters)
    heads = [p for p in adapters.glob(f"*/{HEAD_FILE}")]
    for p in heads:
        p.unlink()
    fingerprint = {st: folder_digest(d)[:16] for st, d in find_stage_adapters(a.adapters).items()}
    load = os.getloadavg()[0]
    written = write_serve_config(recipe, adapters, work / "serve", engines=(a.engine,))
    if a.engine == "vllm":
        from vista_distill.testing.vllm_server import VllmServer, vllm_cpu_python

        args = ["--dtype", a.dtype, "--max-model-len", "4096", "--max-num-seqs", "8", "--seed", "0",
                "--enable-prefix-caching"]
        server = VllmServer(Path(written["out"]) / "vllm.sh", vllm_cpu_python(), extra_args=args,
                            log_path=work / "server.log", env={"OMP_NUM_THREADS": str(a.threads)})
        engine = f"vLLM CPU (vllm-cpu) {' '.join(args)}, VLLM_CPU_KVCACHE_SPACE=1, OMP_NUM_THREADS={a.threads}"
    else:
        from vista_distill.testing.llama_server import LlamaServer

        models = [{k: m[k] for k in ("model_alias", "lora_path") if k in m}
                  for m in json.loads(Path(written["llama_cpp"]["config"]).read_text())["models"]]
        server = LlamaServer(models=models, n_threads=a.threads, log_path=work / "server.log")
        engine = f"llama-cpp-python, Q4_1 GGUF + f32 GGUF LoRA, n_threads {a.threads}"
    with server:
        backend = server_backend(recipe, "student", servers=[server.base_url])
        served, served_wall, served_stats = run(backend, recipe, convs, a.claims)
    local = TransformersBackend(recipe.student.model, adapters=adapters, dtype=a.dtype, threads=a.threads)
    inproc, local_wall, local_stats = run(local, recipe, convs, a.claims)

    turns = sum(1 for x in served if x["scored"])
    out = {
        "cpu": detect("cpu").describe(), "loadavg_start": load, "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": "python bench/server_student.py " + " ".join(sys.argv[1:]), "engine": a.engine,
        "input": a.input, "conversations": len(convs), "claims": a.claims, "label_scoring": backend.method,
        "adapters": str(a.adapters), "adapters_fingerprint": fingerprint, "evidence_head": bool(heads),
        "adapter_stages": sorted(find_stage_adapters(adapters)),
        "server": {"engine": engine, "wall_s": round(served_wall, 1), "turns_per_s": round(turns / served_wall, 4),
                   "requests": served_stats.get("calls"),
                   "prompt_tokens_per_turn": round(served_stats.get("prompt_tokens", 0) / max(1, turns))},
        "in_process": {"engine": f"transformers {a.dtype}, prefix cache, slot decoding, threads {a.threads}",
                       "wall_s": round(local_wall, 1), "turns_per_s": round(turns / local_wall, 4),
                       "prompt_tokens_per_turn": round(local_stats.get("prompt_tokens", 0) / max(1, turns))},
        "agreement": agreement(served, inproc),
    }
    name = f"server_student_{short_cpu_label()}_{a.engine}_{a.claims}"
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
    (Path(a.out) / f"{name}.md").write_text(report(out))
    print(report(out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
