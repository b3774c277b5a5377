"""python bench/distill_teacher.py [--limit N] [--concurrency 4]

Benchmark the teacher run against a real OpenAI-compatible server, and demonstrate resume.

Starts llama.cpp (``llama-cpp-python[server]``) serving the embedded SmolLM2-135M GGUF on 127.0.0.1,
then runs ``vista-distill distill`` with the few-shot VISTA prompts over the bundled sample dialogues:

1. uninterrupted, cold server: wall time, calls, requests/s, tokens, filter report;
2. again on the same cache: every call a cache hit (the pipeline's own overhead);
3. a fresh output folder, SIGKILLed at several points (after N completed calls, and once in the
   export phase), then rerun to completion: calls per process, what the server answered, and
   whether the export is identical to run 1's.

Writes ``bench/results/distill_teacher.{md,json}``. About 4 minutes on two busy CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def entries(out: Path) -> int:
    return sum(1 for _ in (out / "calls").glob("??/*.json")) if (out / "calls").exists() else 0


def last_run(out: Path) -> dict:
    return json.loads((out / "runs.jsonl").read_text().splitlines()[-1])


def write_recipe(tmp: Path, out: Path, base_url: str, concurrency: int) -> Path:
    """A recipe distilling the bundled VISTA sample with the llama.cpp server at ``base_url`` as the teacher."""
    from vista_distill.testing.llama_server import MODEL_ALIAS

    teacher = {"backend": "openai", "model": MODEL_ALIAS, "base_url": base_url, "prompt_style": "fewshot",
               "concurrency": concurrency, "max_new_tokens": {"stage1": 64, "stage2": 8, "stage3": 32}}
    data = {"train": [{"benchmark": "vista-human", "source": str(ROOT / "data/samples/sample_dialogues.json")}]}
    path = tmp / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump({"name": "bench-distill", "teacher": teacher, "data": data,
                                    "distill": {"output_dir": str(out), "validation_fraction": 0.34}}))
    return path


def distill_command(config: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "vista_distill", "distill", "--config", str(config), "--no-progress", *extra]


def uninterrupted(server: Any, cfg: Path, out: Path, extra: list[str]) -> dict[str, Any] | None:
    """A cold run, then the same run again all from the call cache; None when the cold run fails."""
    served0 = server.served()
    t = time.perf_counter()
    r = subprocess.run(distill_command(cfg, extra), capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        return None
    wall = time.perf_counter() - t
    manifest = json.loads((out / "manifest.json").read_text())
    print(r.stdout)
    cold = {"process_wall_s": round(wall, 1), **last_run(out), "server_answered": server.served() - served0,
            "filters": manifest["filters"]["report"], "counts": manifest["counts"]}
    t = time.perf_counter()
    subprocess.run(distill_command(cfg, extra), capture_output=True, text=True, check=True)
    cached = {"process_wall_s": round(time.perf_counter() - t, 1), **last_run(out)}
    return {"uninterrupted": cold, "cached_rerun": cached, "fingerprint": manifest["fingerprint"]}


def killed_and_resumed(server: Any, cfg: Path, out: Path, extra: list[str], calls: int) -> dict[str, Any]:
    """SIGKILL after a fifth, half and four fifths of ``calls``, once in the export phase, then a final run."""
    cmd = distill_command(cfg, extra)
    served0 = server.served()
    processes = []
    for target in (max(1, calls // 5), calls // 2, (4 * calls) // 5):
        before = entries(out)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        while entries(out) < target and p.poll() is None:
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        processes.append({"killed": f"after {target} calls", "calls_completed": entries(out) - before,
                          "cache_entries_after": entries(out)})
    before = entries(out)
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "VISTA_DISTILL_DIE_AT": "export:stage2"})
    processes.append({"killed": "in the export phase (before stage2/ is swapped in)", "exit_code": r.returncode,
                      "calls_completed": entries(out) - before, "cache_entries_after": entries(out)})
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    final = last_run(out)
    processes.append({"killed": "no (final run)", "calls_completed": final["calls"],
                      "cache_hits": final["cache_hits"], "cache_entries_after": entries(out)})
    time.sleep(2)   # requests of a killed client still finish on the server
    manifest = json.loads((out / "manifest.json").read_text())
    return {"processes": processes, "calls_total": sum(p["calls_completed"] for p in processes),
            "uninterrupted_calls": calls, "server_answered": server.served() - served0,
            "fingerprint": manifest["fingerprint"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="first N sample dialogues (default: all 3)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: half the cores)")
    args = ap.parse_args()

    from vista_distill.backends.model_loading import embedded_gguf
    from vista_distill.testing.llama_server import LlamaServer

    tmp = Path(tempfile.mkdtemp(prefix="distill-bench-"))
    extra = ["--limit", str(args.limit)] if args.limit else []
    result: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                "load_average_at_start": os.getloadavg()[0]},
                    "model": embedded_gguf().name, "concurrency": args.concurrency, "limit": args.limit}
    with LlamaServer(n_threads=args.threads, log_path=tmp / "server.log") as server:
        result["server"] = {"n_threads": server.n_threads, "reproducible": server.settings.reproducible}
        first = uninterrupted(server, write_recipe(tmp, tmp / "uninterrupted", server.base_url, args.concurrency),
                              tmp / "uninterrupted", extra)
        if first is None:
            return 1
        result["uninterrupted"], result["cached_rerun"] = first["uninterrupted"], first["cached_rerun"]
        cfg = write_recipe(tmp, tmp / "killed", server.base_url, args.concurrency)
        killed = killed_and_resumed(server, cfg, tmp / "killed", extra, first["uninterrupted"]["calls"])
        result["killed_and_resumed"] = {**killed, "export_identical": killed["fingerprint"] == first["fingerprint"]}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "distill_teacher.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "distill_teacher.md").write_text(report(result))
    print(report(result))
    return 0


def report(res: dict) -> str:
    u, c, k = res["uninterrupted"], res["cached_rerun"], res["killed_and_resumed"]
    lines = [
        "# Teacher run against a real OpenAI-compatible server", "",
        f"Server: llama.cpp (`llama-cpp-python[server]`) on 127.0.0.1 serving `{res['model']}`, "
        f"{res['server']['n_threads']} thread(s), one token per forward pass (reproducible greedy answers), "
        f"prompt-state cache on. Teacher: few-shot VISTA prompts, temperature 0, concurrency {res['concurrency']}; "
        f"{'all 3' if not res['limit'] else res['limit']} bundled sample dialogue(s). Machine: "
        f"{res['machine']['cpus']} CPUs, load average {res['machine']['load_average_at_start']:.1f} at start "
        "(shared with other jobs). Generated by `python bench/distill_teacher.py`.", "",
        "| run | calls | cache hits | wall (process) | calls/s | prompt / completion tokens |",
        "|---|---:|---:|---:|---:|---:|",
        f"| uninterrupted, cold server | {u['calls']} | {u['cache_hits']} | {u['process_wall_s']} s | "
        f"{u['calls_per_s']} | {u['prompt_tokens']} / {u['completion_tokens']} |",
        f"| same command again | {c['calls']} | {c['cache_hits']} | {c['process_wall_s']} s | - | - |", "",
        "Filters (uninterrupted run):", "",
        "| stage | teacher answers | kept | dropped |", "|---|---:|---:|---|",
        *[f"| {s} | {r['candidates']} | {r['kept']} | "
          f"{', '.join(f'{k2} {v}' for k2, v in r['dropped'].items()) or '-'} |" for s, r in u["filters"].items()],
        "", "## SIGKILL at several points, then resume", "",
        "| process | killed | calls completed | cache entries after |", "|---:|---|---:|---:|",
        *[f"| {i} | {p['killed']} | {p['calls_completed']} | {p['cache_entries_after']} |"
          for i, p in enumerate(k["processes"], 1)], "",
        f"Calls completed over all processes: **{k['calls_total']}** (uninterrupted run: {k['uninterrupted_calls']}); "
        f"requests the server answered: {k['server_answered']} (the difference is requests in flight when a "
        f"process was killed). Export identical to the uninterrupted run's: **{k['export_identical']}** "
        f"(fingerprint `{k['fingerprint'][:16]}`).", "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
