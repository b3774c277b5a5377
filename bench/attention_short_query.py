"""Attention of a few query tokens over a long KV cache on this CPU: torch's SDPA kernel against the grouped
float32-score path (``backends.model_calls._short_query_attention``) that the backend uses for 1-4 half-precision
query tokens, and, where the first keys are a prefix every row shares, against the cascade path
(``_prefix_attention``), at SmolLM2-135M's head shapes (9 query heads, 3 key/value heads, dim 64).

    python bench/attention_short_query.py [--threads 2] [--out bench/results]

Writes ``bench/results/attention_short_query_<cpu>.json`` and ``.md`` (milliseconds per call, median of 20, and
each path's largest deviation from float32 SDPA). Run it with the cores idle; the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(8, 1, 300), (8, 1, 1500), (16, 1, 800), (1, 1, 1500), (8, 4, 1500), (8, 40, 1500)]
SHARED = [(16, 1, 100, 300), (16, 1, 300, 300), (16, 1, 1500, 300), (8, 1, 1500, 100), (8, 4, 1500, 100)]


def median_ms(fn, n: int = 20) -> float:
    """Median milliseconds of ``n`` calls after a warm-up (``bench/hardware.py``'s timer)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from hardware import timed

    return timed(fn, n) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from vista_distill.backends.model_calls import _prefix_attention, _short_query_attention
    from vista_distill.eval.report import markdown_table
    from vista_distill.runtime.hardware import detect, short_cpu_label

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    load_before = os.getloadavg()[0]
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for b, q, n in SHAPES:
            qt = torch.randn(b, 9, q, 64, dtype=dtype)
            k, v = torch.randn(b, 3, n, 64, dtype=dtype), torch.randn(b, 3, n, 64, dtype=dtype)
            mask = torch.rand(b, 1, q, n) > 0.1
            exact = F.scaled_dot_product_attention(qt.float(), k.float(), v.float(), attn_mask=mask, enable_gqa=True)
            sdpa = lambda: F.scaled_dot_product_attention(qt, k, v, attn_mask=mask, enable_gqa=True)  # noqa: E731
            ours = lambda: _short_query_attention(qt, k, v, mask, None)  # noqa: E731
            rows.append({
                "dtype": str(dtype).replace("torch.", ""), "batch": b, "query_tokens": q, "keys": n,
                "sdpa_ms": round(median_ms(sdpa), 3), "grouped_ms": round(median_ms(ours), 3),
                "sdpa_max_err": float((sdpa().float() - exact).abs().max()),
                "grouped_max_err": float((ours().transpose(1, 2).float() - exact).abs().max()),
            })
            print(json.dumps(rows[-1]), flush=True)
    shared = []
    for b, q, p, n in SHARED:
        dtype = torch.bfloat16
        qt = torch.randn(b, 9, q, 64, dtype=dtype)
        k = torch.cat([torch.randn(1, 3, p, 64, dtype=dtype).expand(b, -1, -1, -1), torch.randn(b, 3, n, 64, dtype=dtype)], 2)
        v = torch.cat([torch.randn(1, 3, p, 64, dtype=dtype).expand(b, -1, -1, -1), torch.randn(b, 3, n, 64, dtype=dtype)], 2)
        mask = torch.ones(b, 1, q, p + n, dtype=torch.bool)
        exact = F.scaled_dot_product_attention(qt.float(), k.float(), v.float(), attn_mask=mask, enable_gqa=True)
        cascade = lambda: _prefix_attention(qt, k, v, mask, None, p)  # noqa: E731
        shared.append({
            "dtype": "bfloat16", "batch": b, "query_tokens": q, "shared_prefix": p, "own_keys": n,
            "sdpa_ms": round(median_ms(lambda: F.scaled_dot_product_attention(qt, k, v, attn_mask=mask, enable_gqa=True)), 3),
            "grouped_ms": round(median_ms(lambda: _short_query_attention(qt, k, v, mask, None)), 3),
            "cascade_ms": round(median_ms(cascade), 3),
            "cascade_max_err": float((cascade().transpose(1, 2).float() - exact).abs().max()),
        })
        print(json.dumps(shared[-1]), flush=True)
    out = {"cpu": detect("cpu").describe(), "torch": torch.__version__, "threads": a.threads,
           "load_before": load_before, "load_after": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M"),
           "rows": rows, "shared_prefix_rows": shared}
    stem = f"attention_short_query_{short_cpu_label()}"
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{stem}.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = ["# Short-query attention: torch SDPA vs the grouped float32-score path", "",
             f"CPU: {out['cpu']}; torch {out['torch']}; {a.threads} threads; load average {load_before:.2f} before, "
             f"{out['load_after']:.2f} after; {out['date']}. `python bench/attention_short_query.py`. 9 query heads, "
             "3 key/value heads, dim 64, a random boolean mask (10% masked); errors against float32 SDPA.", "",
             ""]
    lines += [markdown_table(
        ["dtype", "batch", "query tokens", "keys", "SDPA ms", "grouped ms", "speed-up", "SDPA max err", "grouped max err"],
        [[r["dtype"], r["batch"], r["query_tokens"], r["keys"], r["sdpa_ms"], r["grouped_ms"],
          f"{r['sdpa_ms'] / r['grouped_ms']:.1f}x", f"{r['sdpa_max_err']:.4f}", f"{r['grouped_max_err']:.4f}"] for r in rows])]
    lines += ["", "Where the first keys are a prefix every row shares (bf16; the backend's cascade path for 1-4 query "
              "tokens after a shared prefix of 256+ tokens):", ""]
    lines += [markdown_table(
        ["batch", "query tokens", "shared prefix", "own keys", "SDPA ms", "grouped ms", "cascade ms", "cascade max err"],
        [[r["batch"], r["query_tokens"], r["shared_prefix"], r["own_keys"], r["sdpa_ms"], r["grouped_ms"], r["cascade_ms"],
          f"{r['cascade_max_err']:.4f}"] for r in shared])]
    lines += ["", "The backend takes the cascade path for 1-4 query tokens after a shared prefix of 256+ tokens (any "
              "dtype), else the grouped path for bf16/fp16 queries of 1 token, or up to 4 with a mask (decode steps, "
              "label continuations); longer queries, and short float32 ones without a long shared prefix, keep SDPA."]
    (Path(a.out) / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(Path(a.out) / f"{stem}.md")


if __name__ == "__main__":
    main()
