"""Stage 1's lists decoded in slots with different slot counts and prompt batches, back to back, on the same
requests.

Builds every stage-1 request of the conversations (the pipeline's own first round), then runs them through the
backend with each slot count and each ``slot_decoding.PREFILL_TOKENS`` (how many prompt tokens a refill's batch
runs ahead) in turn, ``--reps`` times, and writes seconds (in decode steps and in prompt batches too), decode
steps, rows per step and how many lists equal the first setting's.

    python bench/decode_slots.py --adapters /path/to/demo/checkpoints [--slots 16,32,24] [--prefill 512] [--reps 2]

Writes ``bench/results/decode_slots_<cpu>.json``. Run it with the cores idle.
"""

from __future__ import annotations

import argparse
import json
import time

import harness

ROOT = harness.ROOT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", default=None, help="the student's stage adapters (none: the few-shot base)")
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"))
    ap.add_argument("--slots", default="16,32,24")
    ap.add_argument("--prefill", default="512", help="values of slot_decoding.PREFILL_TOKENS to try")
    ap.add_argument("--tag", default="", help="suffix of the result file's name")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    from vista_distill.data.io import read_conversations
    from vista_distill.pipeline.engine import vista_program
    from vista_distill.runtime.hardware import short_cpu_label
    from vista_distill.backends import slot_decoding
    from vista_distill.scorer import VistaScorer

    convs = read_conversations(a.input)
    scorer = VistaScorer(adapters=a.adapters, threads=a.threads, batch_size=16)
    backend = scorer.backend
    requests = [r for c in convs for r in next(vista_program(c, scorer.config))]
    backend.run(requests[:4])   # warm-up: prefix cache, adapters
    runs = []
    first: list[str] | None = None
    settings = [(int(s), int(p)) for s in a.slots.split(",") for p in a.prefill.split(",")]
    for rep in range(a.reps):
        for slots, prefill in settings:
            backend.batch_size, slot_decoding.PREFILL_TOKENS = slots, prefill
            before, t0 = dict(backend.stats), time.perf_counter()
            answers = backend.run(requests)
            seconds = time.perf_counter() - t0
            steps = backend.stats["decode_steps"] - before["decode_steps"]
            rows = backend.stats["decode_rows"] - before["decode_rows"]
            first = first or [x.text for x in answers]
            runs.append({"rep": rep, "slots": slots, "prefill_tokens": prefill, "seconds": round(seconds, 1),
                         "decode_s": round(backend.stats["decode_s"] - before["decode_s"], 1),
                         "prompt_s": round(backend.stats["prompt_s"] - before["prompt_s"], 1), "steps": steps,
                         "rows_per_step": round(rows / max(steps, 1), 1),
                         "generated": sum(x.completion_tokens for x in answers),
                         "same_lists_as_first": sum(x.text == y for x, y in zip(answers, first))})
            print(json.dumps(runs[-1]), flush=True)
    path = harness.save(ROOT / "bench" / "results", f"decode_slots_{short_cpu_label()}" + (f"_{a.tag}" if a.tag else ""), {
        **harness.machine(), "commit": harness.commit(), "input": a.input, "requests": len(requests),
        "adapters": a.adapters, "dtype": backend.precision.dtype, "runs": runs})
    print(path)


if __name__ == "__main__":
    main()
