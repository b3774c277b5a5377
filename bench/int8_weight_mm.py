"""A bf16 weight product against torch's int8 weight-only product (``aten._weight_int8pack_mm``, bf16 activations)
at the shapes of a 135M Llama's decode steps: whether int8 weights would speed decoding on this CPU.

    python bench/int8_weight_mm.py [--threads 2]

Writes ``bench/results/int8_weight_mm_<cpu>.json``. Random weights: this times the products, not their accuracy.
"""

from __future__ import annotations

import argparse
import json
import time

import harness

ROOT = harness.ROOT
SHAPES = ((1536, 576), (576, 576), (576, 1536), (49152, 576))   # (out, in): gate/up, q/o, down, head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", default="6,16,32")
    a = ap.parse_args()

    import torch
    from vista_distill.runtime.hardware import short_cpu_label

    torch.set_num_threads(a.threads)

    def micros(f, n: int = 200) -> float:
        for _ in range(5):
            f()
        t = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t) / n * 1e6

    rows_out = []
    for rows in (int(x) for x in a.rows.split(",")):
        for n, k in SHAPES:
            x = torch.randn(rows, k, dtype=torch.bfloat16)
            w = torch.randn(n, k, dtype=torch.bfloat16)
            wi = torch.randint(-127, 127, (n, k), dtype=torch.int8)
            scales = torch.rand(n, dtype=torch.bfloat16)
            bf16 = micros(lambda: torch.nn.functional.linear(x, w))
            int8 = micros(lambda: torch.ops.aten._weight_int8pack_mm(x, wi, scales))
            rows_out.append({"rows": rows, "out": n, "in": k, "bf16_us": round(bf16), "int8_us": round(int8)})
            print(json.dumps(rows_out[-1]), flush=True)
    path = harness.save(ROOT / "bench" / "results", f"int8_weight_mm_{short_cpu_label()}", {
        **harness.machine(), "torch": torch.__version__, "products": rows_out})
    print(path)


if __name__ == "__main__":
    main()
