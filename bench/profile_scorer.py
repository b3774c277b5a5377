"""python bench/profile_scorer.py --adapters /path/to/demo/checkpoints [--input ../shared/data/vista_human/dev.json]
    [--threads 2] [--tag after]

Per-turn time of the in-process scorer against its prefill bound, few-shot and student, in one run.

For each pipeline (the paper's few-shot prompts on the base model; the compact student prompts with
three LoRA adapters) on the same conversations, in one process:

* wall seconds per scored turn, and the backend's forward seconds (model calls) beside the rest;
* tokens the model computed per turn: prompt tokens less those served from the prefix cache plus those
  encoded to fill it, generated tokens, and the extra label tokens of label scoring;
* the prefill bound: those tokens divided by the forward throughput measured in the same process just before
  and just after the run (their mean: the host's pace drifts; tokens/s of a plain batched forward, 8 x 256
  tokens, last-position logits, the run's dtype and threads; for the student with an adapter active), and
  wall / bound. Computed tokens include the empty-reference twins an evidence head scores beside each label
  request (``twin_requests``);
* the compute floor: the floating-point work those tokens need (the decoder's weight products, attention over each
  token's whole context, the LM head where logits are read), priced at the FLOP rate of the bound's own
  measurement: what a perfect implementation at the plain prefill's efficiency would take, decoding's
  memory-bound steps credited at that rate too (so a lower bound on this CPU), and floor / bound;
* the cProfile functions with the most self time (what is not model compute shows up there).

A speed change must not change what the scorer says: ``--records DIR`` writes each pipeline's records, and
``python bench/profile_scorer.py --compare BEFORE_DIR AFTER_DIR`` counts the turns whose claims, verdicts and
categories stayed the same.

Writes ``bench/results/profile_scorer_<cpu>[_<tag>].json`` and ``.md``. Run it with the cores idle: the
load average is sampled during the run and recorded.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from score_throughput import LoadSampler, StageCounter, run_facts

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"


def _median_rate(backend: Any, forward: Any, tokens: int, repeats: int) -> float:
    """Tokens/s of ``forward()`` (one warm-up call, then the median of ``repeats``), the GPU synchronised around it."""
    import torch

    sync = torch.cuda.synchronize if str(backend.device).startswith("cuda") else (lambda: None)
    forward()
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        forward()
        sync()
        times.append(time.perf_counter() - t)
    return tokens / sorted(times)[len(times) // 2]


def forward_throughput(backend: Any, stage: str | None, batch: int = 8, length: int = 256, repeats: int = 3) -> float:
    """Tokens/s of one plain forward (no cache, last-position logits) with ``stage``'s adapter active."""
    import torch

    ids = torch.randint(100, 40000, (batch, length), device=backend.device)
    with backend._adapter_context(stage or "none"), torch.inference_mode():
        return _median_rate(backend, lambda: backend.model(input_ids=ids, use_cache=False, logits_to_keep=1),
                            batch * length, repeats)


def forward_throughput_after_prefix(backend: Any, stage: str | None, prefix_len: int, batch: int = 8,
                                    length: int = 256, repeats: int = 3) -> float:
    """Tokens/s of a batched forward of ``batch`` x ``length`` new tokens continuing a cached shared prefix of
    ``prefix_len`` tokens, through the backend's own prefix cache and attention paths: what a prefill of the run's
    uncached tokens costs where they sit, their attention over the shared prefix included. The prefix cache's
    per-call batch copy is made outside the timed forward."""
    import torch

    if prefix_len < 1:
        return forward_throughput(backend, stage, batch, length, repeats)
    g = torch.Generator().manual_seed(0)
    prefix = tuple(torch.randint(100, 40000, (prefix_len,), generator=g).tolist())
    suffixes = [torch.randint(100, 40000, (length,), generator=g).tolist() for _ in range(batch)]
    name = stage or "none"
    with backend._adapter_context(name), torch.inference_mode(), backend._shared(prefix):
        batches = [backend._batch_inputs(name, prefix, suffixes) for _ in range(repeats + 1)]  # fills the prefix cache
        ids, mask, _ = batches[0]
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)

        def forward() -> None:
            backend.model(input_ids=ids[:, prefix_len:], attention_mask=mask, position_ids=positions[:, prefix_len:],
                          **{backend.cache_kw: batches.pop()[2]}, use_cache=True, logits_to_keep=1)

        return _median_rate(backend, forward, batch * length, repeats)


def model_shape(model: Any) -> dict[str, float]:
    """FLOPs of the model a token costs: ``linear`` (the decoder layers' weight products, LoRA excluded),
    ``head`` (the LM head, per position whose logits are read) and ``attention`` (per token per key it attends to:
    scores and values over every query head)."""
    import torch

    cfg = model.config
    linear = sum(m.in_features * m.out_features for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and ".layers." in name and "lora_" not in name)
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return {"linear": 2.0 * linear, "head": 2.0 * cfg.hidden_size * cfg.vocab_size,
            "attention": 4.0 * heads * head_dim * cfg.num_hidden_layers}


def compute_floor(
    shape: dict[str, float], pipeline: dict[str, Any], batch: int = 8, length: int = 256
) -> dict[str, Any]:
    """Seconds the pipeline's computed tokens need at the FLOP rate the plain bound measured (``batch`` x ``length``
    tokens, no cache, last-position logits), per stage and in all. Each stage's requests are taken at their means
    (shared prefix P, computed suffix S, G generated tokens): a prompt token attends over P + S/2 keys, a generated
    one over P + S + G/2, a label token over P + S; logits are read once per request, per generated and per label
    token. Means understate the attention of uneven lengths, and decoding is credited at prefill's efficiency:
    the floor is a lower bound."""
    plain = (batch * length * (shape["linear"] + shape["attention"] * (length + 1) / 2) + batch * shape["head"])
    flop_rate = pipeline["forward_tokens_per_s"] * plain / (batch * length)
    stages: dict[str, dict[str, float]] = {}
    for st, d in pipeline["per_stage"].items():
        n = max(d["requests"] + d.get("twin_requests", 0), 1)
        p = pipeline["bound_at_context"][st]["mean_prefix_tokens"]
        prompt, gen, label = d["computed_prompt_tokens"], d["generated_tokens"], d["label_tokens"]
        suffix = prompt / n
        keys = prompt * (p + suffix / 2) + gen * (p + suffix + gen / n / 2) + label * (p + suffix)
        flops = (prompt + gen + label) * shape["linear"] + keys * shape["attention"] + (n + gen + label) * shape["head"]
        stages[st] = {"tflop": round(flops / 1e12, 3), "attention_share": round(keys * shape["attention"] / flops, 3),
                      "floor_s": round(flops / flop_rate, 2), "forward_s": d["forward_s"]}
    floor = sum(x["floor_s"] for x in stages.values())
    bound = pipeline["bound_s_per_turn"] * pipeline["scored_turns"]
    return {"gflop_per_s": round(flop_rate / 1e9, 1), "stages": stages,
            "floor_s_per_turn": round(floor / pipeline["scored_turns"], 3),
            "floor_over_bound": round(floor / bound, 2), "wall_over_floor": round(pipeline["wall_s"] / floor, 2)}


def top_self_time(prof: cProfile.Profile, n: int = 15) -> list[dict[str, Any]]:
    stats = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (file, line, fn), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({fn})" if file != "~" else fn, "calls": ncalls,
                     "self_s": round(tottime, 2), "cumulative_s": round(cumtime, 2)})
    return sorted(rows, key=lambda r: -r["self_s"])[:n]


def profile_pipeline(name: str, scorer: Any, convs: list, threads: int, records_dir: str | None = None,
                     cprofile: bool = True) -> dict[str, Any]:
    counter = StageCounter(scorer.backend)
    scorer.backend = counter
    stage = "stage2" if counter.inner.adapters else None
    import torch

    cuda = str(counter.inner.device).startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before = forward_throughput(counter.inner, stage)
    prof = cProfile.Profile()
    with LoadSampler() as load:
        t0 = time.perf_counter()
        if cprofile:
            prof.enable()
        res = scorer.score(convs)
        prof.disable()
        wall = time.perf_counter() - t0
    after = forward_throughput(counter.inner, stage)
    tput = (before + after) / 2   # the host's pace drifts: the rate measured on both sides of the run
    # each stage's tokens priced at the rate of a prefill after that stage's mean shared prefix (measured after the run)
    context: dict[str, dict[str, float]] = {}
    for st, d in sorted(counter.per_stage.items()):
        p = round(d["prefix_tokens_reused"] / max(d["requests"] + d.get("twin_requests", 0), 1))
        rate = forward_throughput_after_prefix(counter.inner, st if counter.inner.adapters else stage, p)
        tokens = d["computed_prompt_tokens"] + d["generated_tokens"] + d["label_tokens"]
        context[st] = {"mean_prefix_tokens": p, "tokens_per_s": round(rate, 1), "bound_s": round(tokens / rate, 2)}
    facts = run_facts(res.records)
    if records_dir:
        Path(records_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(records_dir) / f"{name}.jsonl", "w") as f:
            for rec in res.records:
                f.write(json.dumps(rec.to_dict() if hasattr(rec, "to_dict") else rec, default=str) + "\n")
    turns = facts["scored_turns"]
    tot = counter.totals()
    computed = tot["computed_prompt_tokens"] + tot["generated_tokens"] + tot["label_tokens"]
    bound = computed / tput
    out = {
        "pipeline": name,
        "style": scorer.config.style,
        "adapters": {k: str(v) for k, v in counter.inner.adapters.items()},
        "merged_adapters": getattr(counter.inner, "merged", None) is not None,
        "dtype": str(counter.inner.torch_dtype).replace("torch.", ""),
        "threads": threads,
        "wall_s": round(wall, 1),
        "forward_s": round(tot["forward_s"], 1),
        "outside_forward_s": round(wall - tot["forward_s"], 1),
        "scored_turns": turns,
        "scored_claims": facts["scored_claims"],
        "s_per_turn": round(wall / turns, 3),
        "forward_tokens_per_s": round(tput, 1),
        "forward_tokens_per_s_before_after": [round(before, 1), round(after, 1)],
        "computed_tokens_per_turn": round(computed / turns, 1),
        "computed_prompt_tokens_per_turn": round(tot["computed_prompt_tokens"] / turns, 1),
        "generated_tokens_per_turn": round(tot["generated_tokens"] / turns, 1),
        "label_tokens_per_turn": round(tot["label_tokens"] / turns, 1),
        "prompt_tokens_per_turn": round(tot["prompt_tokens"] / turns, 1),
        "bound_s_per_turn": round(bound / turns, 3),
        "wall_over_bound": round(wall / bound, 2),
        "bound_at_context": context,
        "bound_at_context_s_per_turn": round(sum(c["bound_s"] for c in context.values()) / turns, 3),
        "wall_over_bound_at_context": round(wall / max(sum(c["bound_s"] for c in context.values()), 1e-9), 2),
        "per_stage": {s: {k: round(v, 2) for k, v in d.items()} for s, d in sorted(counter.per_stage.items())},
        "verdicts_safe": facts["verdicts_safe"],
        "categories": facts["categories"],
        "load": load.summary(),
        "cprofile": cprofile,
        "top_self_time": top_self_time(prof) if cprofile else [],
        "decoding": {
            k: counter.inner.stats.get(k, 0) for k in ("decode_steps", "decode_rows", "refills", "decode_s", "prompt_s")
        },
        "peak_cuda_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "model_shape": model_shape(counter.inner.model),
    }
    out["floor"] = compute_floor(out["model_shape"], out)
    return out


def report(out: dict[str, Any]) -> str:
    lines = [
        "# In-process scorer: seconds per scored turn against the prefill bound",
        "",
        (
            f"CPU: {out['cpu']}; device: {out.get('device', 'cpu')}; model: {out.get('model', 'embedded')}. "
            f"{out['torch']}; {out['conversations']} conversations of `{out['input']}`, "
            f"one process, {out['date']}. Command: `{out['command']}`."
        ),
        "",
        (
            "Bound = tokens the model computed per turn (uncached prompt tokens + generated + label tokens) / "
            "the forward throughput measured in the same process, just before and just after the run (their mean; "
            "8 x 256 tokens, no cache, last-position logits; the run's dtype and threads). Computed tokens include the "
            "empty-reference twins an evidence head scores beside each label request. Decoding and attention over long "
            "cached prefixes cost more per token than that throughput, so wall / bound above 1 is partly model compute "
            "the bound does not count."
        ),
        "",
        "| pipeline | dtype | threads | scored turns | wall s | s / turn | forward s | outside forward s "
        "| tokens computed / turn | forward tok/s | bound s / turn | wall / bound | load (mean) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in out["pipelines"]:
        lines.append(
            f"| {p['pipeline']} | {p['dtype']} | {p['threads']} | {p['scored_turns']} | {p['wall_s']} | "
            f"{p['s_per_turn']} | {p['forward_s']} | {p['outside_forward_s']} | {p['computed_tokens_per_turn']} | "
            f"{p['forward_tokens_per_s']} | {p['bound_s_per_turn']} | {p['wall_over_bound']} | "
            f"{p['load']['mean']:.2f} |"
        )
    lines += _bound_lines(out)
    for p in out["pipelines"]:
        lines += _stage_lines(p)
    return "\n".join(lines) + "\n"


def _bound_lines(out: dict[str, Any]) -> list[str]:
    """The bound at context and the compute floor, where the profile has them."""
    lines: list[str] = []
    if all("bound_at_context" in p for p in out["pipelines"]):
        lines += ["", ("Bound at context: each stage's computed tokens priced at the rate of a batched prefill "
                       "(8 x 256 tokens) that continues a cached shared prefix as long as that stage's mean (the "
                       "attention over the prefix is counted; measured once, just after the run)."), "",
                  "| pipeline | stage | mean shared prefix | tok/s after it | bound s | bound at context s / turn "
                  "| wall / bound at context |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for p in out["pipelines"]:
            for st, c in p["bound_at_context"].items():
                lines.append(
                    f"| {p['pipeline']} | {st} | {c['mean_prefix_tokens']} | {c['tokens_per_s']} | "
                    f"{c['bound_s']} | {p['bound_at_context_s_per_turn']} | {p['wall_over_bound_at_context']} |"
                )
    if all("floor" in p for p in out["pipelines"]):
        lines += [
            "",
            (
                "Compute floor: the FLOPs the computed tokens need (weight products, attention over each token's "
                "whole context, the LM head where logits are read; `compute_floor` says how) at the FLOP rate "
                "of the bound's own 8 x 256 measurement. Decoding is credited at that rate although its steps "
                "are memory-bound here, so the floor is a lower bound: floor / bound above 1 is work the bound "
                "leaves out, wall / floor what the implementation adds."
            ),
            "",
            "| pipeline | stage | TFLOP | attention share | floor s | forward s | floor s / turn | floor / bound "
            "| wall / floor |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for p in out["pipelines"]:
            f = p["floor"]
            for st, x in f["stages"].items():
                lines.append(f"| {p['pipeline']} | {st} | {x['tflop']} | {x['attention_share']:.0%} | {x['floor_s']} | "
                             f"{x['forward_s']:.1f} | {f['floor_s_per_turn']} | {f['floor_over_bound']} | "
                             f"{f['wall_over_floor']} |")
    return lines


def _stage_lines(p: dict[str, Any]) -> list[str]:
    """One pipeline's per-stage table, its decoding and memory, and its most self time."""
    lines: list[str] = []
    lines += [
        "",
        f"## {p['pipeline']}: per stage",
        "",
        "| stage | requests | twins | prompt tokens | computed prompt tokens | generated | label tokens "
        "| forward s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s, d in p["per_stage"].items():
        lines.append(
            f"| {s} | {int(d['requests'])} | {int(d.get('twin_requests', 0))} | {int(d['prompt_tokens'])} | "
            f"{int(d['computed_prompt_tokens'])} | {int(d['generated_tokens'])} | {int(d['label_tokens'])} | "
            f"{d['forward_s']:.1f} |"
        )
    if p.get("merged_adapters"):
        lines += ["", "Stage adapters merged into copies of the weights (`merge_adapters`)."]
    d = p.get("decoding")
    if d:
        lines += [
            "",
            f"Stage-1 decoding: {d['decode_steps']} steps, {d['decode_rows']} rows, {d['refills']} refills; "
            f"{d.get('decode_s', 0):.1f} s in decode steps, {d.get('prompt_s', 0):.1f} s in prompt blocks "
            "(the prompt batches and their copies into freed rows).",
        ]
    if p.get("peak_cuda_gib") is not None:
        lines += ["", f"Peak CUDA memory (torch.cuda.max_memory_allocated, the run and both rate measurements): "
                      f"{p['peak_cuda_gib']} GiB."]
    if not p.get("top_self_time"):
        return lines + ["", "Timed without cProfile (`--no-cprofile`)."]
    lines += [
        "",
        "Most self time (cProfile):",
        "",
        "| function | calls | self s | cumulative s |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| `{r['function']}` | {r['calls']} | {r['self_s']} | {r['cumulative_s']} |"
        for r in p["top_self_time"][:10]
    ]
    return lines


def add_floor(path: Path) -> None:
    """The compute floor of a profile saved before it was measured, from the embedded model's shape."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from vista_distill.backends.model_loading import embedded_model_path

    out = json.loads(path.read_text())
    with torch.device("meta"):
        shape = model_shape(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(embedded_model_path())))
    for p in out["pipelines"]:
        p["model_shape"] = p.get("model_shape") or shape
        p["floor"] = compute_floor(p["model_shape"], p)
    path.write_text(json.dumps(out, indent=2) + "\n")
    path.with_suffix(".md").write_text(report(out))
    print(path.with_suffix(".md"))


def compare_records(before: list[dict], after: list[dict]) -> dict:
    """Two runs' records of the same turns: how many have the same stage-1 claims, the same verdicts, and (where the
    claims are the same) the same categories. For a speed change that must not change what the scorer says."""
    if [(r["conversation_id"], r["turn_index"]) for r in before] != [(r["conversation_id"], r["turn_index"])
                                                                        for r in after]:
        raise SystemExit("the two runs scored different turns")
    pairs = [(a, b) for a, b in zip(before, after) if a.get("scored") and b.get("scored")]
    claims = lambda r: [c["text"] for c in r.get("claims", [])]  # noqa: E731
    same = [(a, b) for a, b in pairs if claims(a) == claims(b)]
    cats = [(x.get("category"), y.get("category")) for a, b in same for x, y in zip(a["claims"], b["claims"])]
    return {
        "turns": len(pairs), "same_claims": len(same),
        "same_verdict": {rule: sum(a["verdicts"].get(rule) == b["verdicts"].get(rule) for a, b in pairs)
                         for rule in ("safe", "strict")},
        "claims_on_same_claim_turns": len(cats), "same_category": sum(x == y for x, y in cats),
    }


def compare_dirs(before: str, after: str) -> None:
    """Print the comparison of every ``<pipeline>.jsonl`` two ``--records`` folders hold."""
    load = lambda p: [json.loads(line) for line in p.read_text().splitlines()]  # noqa: E731
    out = {f.stem: compare_records(load(f), load(Path(after) / f.name)) for f in sorted(Path(before).glob("*.jsonl"))}
    print(json.dumps({"before": before, "after": after, "pipelines": out}, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adapters", default=None, help="folder with stage1/ stage2/ stage3/ adapters (the student)")
    ap.add_argument("--model", default=None, help="base model folder or hub id (default: the embedded SmolLM2-135M)")
    ap.add_argument(
        "--load-in-4bit", action="store_true", help="NF4 base weights (bitsandbytes), as QLoRA recipes score"
    )
    ap.add_argument("--claims", default=None, help="gold: the input's human claims replace stage 1")
    ap.add_argument("--input", default=str(DEFAULT_INPUT))
    ap.add_argument("--limit", type=int, default=None, help="first N conversations")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="auto", help="the model's precision (auto, float32, bfloat16)")
    ap.add_argument("--batch-size", type=int, default=16, help="requests per forward / generate call")
    ap.add_argument("--pipelines", default="fewshot,student")
    ap.add_argument("--prefill-tokens", default="auto",
                    help="label-scoring batches' padded-token budget: auto (the backend's), none, or a number")
    ap.add_argument("--merge-adapters", default="auto", choices=["auto", "true", "false"],
                    help="the student's stage adapters merged into copies of the weights (auto: in float32)")
    ap.add_argument("--no-cprofile", action="store_true",
                    help="time the run without cProfile (its per-call hooks slow a decode loop of small ops)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--records", default=None, help="folder to write each pipeline's records to (<pipeline>.jsonl)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--floor-of", default=None,
                    help="a saved profile JSON: add the compute floor to it (the embedded model's shape) and rewrite "
                         "its .md, running nothing else")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), default=None,
                    help="two --records folders: how many turns keep their claims, verdicts and categories")
    a = ap.parse_args()
    if a.compare:
        return compare_dirs(*a.compare)
    if a.floor_of:
        return add_floor(Path(a.floor_of))
    if not a.adapters:
        ap.error("--adapters is required: the student's stage adapters (e.g. a demo run's checkpoints folder)")

    import torch

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.runtime.hardware import detect, short_cpu_label
    from vista_distill.scorer import VistaScorer

    convs = read_conversations(a.input)[: a.limit]
    out: dict[str, Any] = {
        "cpu": detect("cpu").describe(),
        "device": detect().describe(),
        "model": a.model or "embedded SmolLM2-135M",
        "torch": f"torch {torch.__version__}",
        "input": a.input,
        "conversations": len(convs),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": "python bench/profile_scorer.py " + " ".join(sys.argv[1:]),
        "pipelines": [],
    }
    merge = {"true": True, "false": False}.get(a.merge_adapters, "auto")
    for name in a.pipelines.split(","):
        backend = TransformersBackend(a.model, adapters=a.adapters if name == "student" else None, threads=a.threads,
                                      dtype=a.dtype, batch_size=a.batch_size, load_in_4bit=a.load_in_4bit,
                                      merge_adapters=merge)
        scorer = VistaScorer(backend=backend, **({"claims": a.claims} if a.claims else {}))
        if a.prefill_tokens != "auto":
            scorer.backend.prefill_tokens = None if a.prefill_tokens == "none" else int(a.prefill_tokens)
        out["pipelines"].append(profile_pipeline(name, scorer, convs, a.threads, a.records,
                                                   cprofile=not a.no_cprofile))
        print(json.dumps({k: v for k, v in out["pipelines"][-1].items() if k not in ("top_self_time", "per_stage")}),
              flush=True)
        del scorer
    stem = f"profile_scorer_{short_cpu_label()}" + (f"_{a.tag}" if a.tag else "")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{stem}.json").write_text(json.dumps(out, indent=2) + "\n")
    (Path(a.out) / f"{stem}.md").write_text(report(out))
    print(Path(a.out) / f"{stem}.md")


if __name__ == "__main__":
    main()
