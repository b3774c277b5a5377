"""What each evaluated system costs: wall time, peak memory and tokens (:class:`Meter`), and the price
of 1,000 scored turns from the prices the recipe configures (:func:`cost_per_1k_turns`)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ..config import Recipe


class Meter:
    """Wall time, peak RSS (sampled every 50 ms by a thread), CUDA peak memory, backend token counters."""

    def __init__(self, backend: Any = None) -> None:
        self.backend = backend
        self.peak_rss = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(0.05)

    def _take(self) -> None:
        try:
            import psutil
        except ImportError:   # the process's lifetime peak instead (Linux reports KiB)
            import resource

            self.peak_rss = max(self.peak_rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
            return
        self.peak_rss = max(self.peak_rss, psutil.Process().memory_info().rss)

    def __enter__(self) -> Meter:  # noqa: PYI034 (typing.Self needs Python 3.11)
        import torch

        self.cuda = torch.cuda.is_available()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.stats_before = dict(self.backend.stats)
        self._take()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        self.wall = time.perf_counter() - self.start
        self._stop.set()
        self._thread.join()
        self._take()
        self.cuda_peak = int(torch.cuda.max_memory_allocated()) if self.cuda else None
        after = self.backend.stats
        self.stats = {k: v - self.stats_before.get(k, 0) for k, v in after.items() if isinstance(v, (int, float))}

    def report(self, scored_turns: int) -> dict[str, Any]:
        hits, calls = self.stats.get("hits"), self.stats.get("calls")
        return {
            # a teacher answering from its call cache is not measuring the teacher's speed
            "cache_hit_share": round(hits / (hits + calls), 4) if hits is not None and calls is not None
            and hits + calls else None,
            "wall_s": round(self.wall, 3),
            "scored_turns": scored_turns,
            "turns_per_s": round(scored_turns / self.wall, 4) if self.wall else None,
            "prompt_tokens": self.stats.get("prompt_tokens"),
            "completion_tokens": self.stats.get("completion_tokens"),
            "backend_stats": {k: round(v, 3) if isinstance(v, float) else v for k, v in self.stats.items()},
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
            "cuda_max_memory_allocated_mb": round(self.cuda_peak / 2**20, 1) if self.cuda_peak is not None else None,
        }


def cost_per_1k_turns(recipe: Recipe, system: str, eff: dict[str, Any]) -> dict[str, Any] | None:
    """Cost per 1,000 scored turns from whichever prices the recipe configures for ``system``."""
    e = recipe.eval
    turns = eff.get("scored_turns") or 0
    if not turns:
        return None
    if system in e.price_per_1k_turns:
        return {"usd": e.price_per_1k_turns[system], "basis": "eval.price_per_1k_turns"}
    if system in e.price_per_1m_tokens:
        price = e.price_per_1m_tokens[system]
        usd = ((eff.get("prompt_tokens") or 0) * price.get("prompt", 0.0)
               + (eff.get("completion_tokens") or 0) * price.get("completion", 0.0)) / 1e6
        return {"usd": usd / turns * 1000, "basis": f"eval.price_per_1m_tokens {price}"}
    if system in e.price_per_hour:
        usd = e.price_per_hour[system] * eff["wall_s"] / 3600
        return {"usd": usd / turns * 1000, "basis": f"eval.price_per_hour {e.price_per_hour[system]} x wall time"}
    return None
