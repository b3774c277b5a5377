"""The student in-process (transformers, float32) against the same adapters on a llama.cpp server
(``vista-distill serve-config``: GGUF LoRA, one alias per stage), on the same inputs, in one run:
turns/s, tokens per turn, and how often labels and verdicts agree.

    python bench/server_student.py --adapters DIR --input DIALOGUES [--limit N] [--claims model|gold]

Results: bench/results/server_student_<cpu>.json and .md. Threads: one for each side (the other core
stays free for the server's HTTP work), and the load average is recorded.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))


def run(backend, recipe, convs, claims: str):
    from vista_distill.pipeline.engine import run_programs, vista_program

    cfg = dataclasses.replace(recipe.engine_config("student"), claims=claims)
    before = dict(backend.stats)
    t = time.perf_counter()
    res = run_programs([vista_program(c, cfg) for c in convs], backend, batched=True)
    wall = time.perf_counter() - t
    stats = {k: v - before.get(k, 0) for k, v in backend.stats.items() if isinstance(v, (int, float))}
    return [x.to_dict() for turns in res for x in turns], wall, stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--config", default=str(ROOT / "recipes" / "demo-cpu.yaml"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--claims", choices=("model", "gold"), default="model")
    ap.add_argument("--label-scoring", default="top_logprobs")
    ap.add_argument("--top-logprobs", type=int, default=100)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    from vista_distill.backends.llama_server import LlamaServer
    from vista_distill.backends.server import server_backend
    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.config import load_recipe
    from vista_distill.data.io import read_conversations
    from vista_distill.hardware import detect
    from vista_distill.serve_config import write_serve_config

    recipe = load_recipe(a.config, [f"student.serving.label_scoring={a.label_scoring}",
                                    f"student.serving.top_logprobs={a.top_logprobs}", "student.serving.concurrency=1"])
    convs = read_conversations(a.input)[: a.limit]
    load = os.getloadavg()[0]
    written = write_serve_config(recipe, a.adapters, Path("/tmp") / "bench-serve", engines=("llama_cpp",))
    models = [{k: m[k] for k in ("model_alias", "lora_path") if k in m}
              for m in json.loads(Path(written["llama_cpp"]["config"]).read_text())["models"]]
    with LlamaServer(models=models, n_threads=1, log_path="/tmp/bench-serve/server.log") as srv:
        backend = server_backend(recipe, "student", servers=[srv.base_url])
        served, served_wall, served_stats = run(backend, recipe, convs, a.claims)
    local = TransformersBackend(recipe.student.model, adapters=a.adapters, dtype="float32", threads=1)
    inproc, local_wall, local_stats = run(local, recipe, convs, a.claims)

    turns = [(x, y) for x, y in zip(served, inproc) if x["scored"]]
    same_claims = [(c, d) for x, y in turns for c, d in zip(x["claims"], y["claims"]) if c["text"] == d["text"]]
    n_claims = sum(len(y["claims"]) for _, y in turns)
    out = {
        "cpu": detect("cpu").describe(), "loadavg_start": load, "date": time.strftime("%Y-%m-%d %H:%M"),
        "input": a.input, "conversations": len(convs), "scored_turns": len(turns), "claims": a.claims,
        "label_scoring": backend.method, "top_logprobs": a.top_logprobs,
        "server": {"wall_s": round(served_wall, 1), "turns_per_s": round(len(turns) / served_wall, 4),
                   "requests": served_stats.get("calls"), "prompt_tokens_per_turn": round(served_stats["prompt_tokens"] / len(turns)),
                   "threads": 1, "engine": "llama-cpp-python, Q4_1 GGUF + f32 GGUF LoRA, n_batch 1"},
        "in_process": {"wall_s": round(local_wall, 1), "turns_per_s": round(len(turns) / local_wall, 4),
                       "prompt_tokens_per_turn": round(local_stats["prompt_tokens"] / len(turns)), "threads": 1,
                       "engine": "transformers float32, prefix cache"},
        "agreement": {
            "stage1_claims_identical_turns": sum([c["text"] for c in x["claims"]] == [c["text"] for c in y["claims"]]
                                                 for x, y in turns) / len(turns),
            "category_same_claims": sum(c["category"] == d["category"] for c, d in same_claims) / max(1, len(same_claims)),
            "claims_compared": len(same_claims), "claims_in_process": n_claims,
            "verdict_strict": sum(x["verdicts"].get("strict") == y["verdicts"].get("strict") for x, y in turns) / len(turns),
            "verdict_safe": sum(x["verdicts"].get("safe") == y["verdicts"].get("safe") for x, y in turns) / len(turns),
        },
    }
    from vista_distill.hardware import short_cpu_label

    name = f"server_student_{short_cpu_label()}_{a.claims}"
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
