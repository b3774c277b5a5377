"""python bench/score_throughput.py [--input ../shared/data/vista_human/dev.json] [--limit 8] [--dtype bfloat16]

Scoring throughput: batched engine vs one request at a time (the authors' loop), same inputs.

Runs several configurations in one process on the same backend and inputs and records wall time,
turns/s, the speed-up ratio and how far the outputs agree (claims, labels, verdicts). Configurations
(``--configs``, comma-separated; the last one is the baseline of the speed-up column):

* batched     : every ready request of a stage in one call, shared prompt prefix encoded once;
* single      : one request per call, prefix cache still on;
* authors     : one request per call, no prefix cache, labels still picked by likelihood;
* authors-gen : the authors' loop proper: one request per call, no prefix cache, stages 2-3 answered
  by free generation and parsed.

The command above runs the few-shot base pipeline (the default; writes ``score_throughput.md``).

Student pipeline (compact prompts + one LoRA adapter per stage), batched label scoring vs the
authors' loop, plus per-claim token counts of the few-shot base pipeline on the same inputs::

    python bench/score_throughput.py --adapters checkpoints/experiment-135m-cpu \\
        --configs batched,authors-gen --fewshot-tokens --limit 6 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "vista_human" / "dev.json"
SAMPLE = ROOT / "data" / "samples" / "sample_dialogues.json"
LEGACY_CONFIGS = ("batched", "single", "authors")
# name -> (batched, prefix cache, stage 2/3 mode)
CONFIGS: dict[str, tuple[bool, bool, str]] = {
    "batched": (True, True, "score"),
    "single": (False, True, "score"),
    "authors": (False, False, "score"),
    "authors-gen": (False, False, "generate"),
}
TOKEN_KEYS = ("requests", "twin_requests", "prompt_tokens", "model_prompt_tokens", "prefix_tokens_reused",
              "prefix_tokens_encoded", "computed_prompt_tokens", "generated_tokens", "label_tokens", "forward_s")


def agreement(a: list[dict], b: list[dict]) -> dict[str, float]:
    same_claims = sum([c["text"] for c in x["claims"]] == [c["text"] for c in y["claims"]] for x, y in zip(a, b))
    pairs = [(c, d) for x, y in zip(a, b) for c, d in zip(x["claims"], y["claims"])]
    same_cat = sum(c["category"] == d["category"] for c, d in pairs)
    same_verdict = sum(x["verdicts"] == y["verdicts"] for x, y in zip(a, b))
    max_dp = max((abs(c["stage2"]["probs"][k] - d["stage2"]["probs"][k])
                  for c, d in pairs if c["stage2"] and d["stage2"] and c["stage2"]["probs"] and d["stage2"]["probs"]
                  for k in c["stage2"]["probs"]), default=0.0)
    return {"turns_same_claims": same_claims / len(a), "claims_same_category": same_cat / max(len(pairs), 1),
            "turns_same_verdicts": same_verdict / len(a), "max_stage2_prob_diff": max_dp}


def agreement_detail(a: list[dict], b: list[dict]) -> dict[str, Any]:
    """Agreement of two runs on scored turns; claim labels compared where both decomposed a turn alike."""
    pairs = [(x, y) for x, y in zip(a, b) if x["scored"]]
    alike = [(x, y) for x, y in pairs if [c["text"] for c in x["claims"]] == [c["text"] for c in y["claims"]]]
    claims = [(c, d) for x, y in alike for c, d in zip(x["claims"], y["claims"])]
    s2 = [(c, d) for c, d in claims if c["stage2"] and d["stage2"]]
    out: dict[str, Any] = {
        "scored_turns": len(pairs),
        "turns_same_claims": len(alike),
        "claims_compared": len(claims),
        "claims_same_stage2_label": sum(c["stage2"]["label"] == d["stage2"]["label"] for c, d in s2),
        "claims_same_category": sum(c["category"] == d["category"] for c, d in claims),
    }
    for rule in ("safe", "strict"):
        out[f"turns_same_verdict_{rule}"] = sum(x["verdicts"].get(rule) == y["verdicts"].get(rule)
                                                for x, y in pairs)
    return out


def run_facts(records: list[dict]) -> dict[str, Any]:
    """One run's output in counts: scored turns and claims, unparsed claims, verdicts (safe rule)."""
    scored = [r for r in records if r["scored"]]
    claims = [c for r in scored for c in r["claims"]]
    verdicts: dict[str, int] = {}
    for r in scored:
        verdicts[r["verdicts"]["safe"]] = verdicts.get(r["verdicts"]["safe"], 0) + 1
    cats: dict[str, int] = {}
    for c in claims:
        cats[str(c["category"])] = cats.get(str(c["category"]), 0) + 1
    return {"turns": len(records), "scored_turns": len(scored), "scored_claims": len(claims),
            "all_claims": sum(len(r["claims"]) for r in records),
            "unparsed_claims": sum(c["category"] is None for c in claims), "verdicts_safe": verdicts,
            "categories": cats}


class StageCounter:
    """Wraps a ``TransformersBackend``: counts requests and tokens per stage; everything else is delegated.

    ``computed_prompt_tokens`` = prompt tokens the model actually ran: all of them (``model_prompt_tokens``: the
    requests' and, where a stage has an evidence head, their empty-reference twins', ``twin_requests``), less
    the prefix tokens served from the cache, plus the prefix tokens encoded to fill it. ``label_tokens`` are the
    extra forward tokens of label scoring (label continuation tokens after the first), twins' included.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.per_stage: dict[str, dict[str, float]] = {}
        self._label_len: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reset(self) -> None:
        self.per_stage = {}

    def _extra_label_tokens(self, labels: Sequence[str]) -> int:
        for lab in labels:
            if lab not in self._label_len:
                self._label_len[lab] = len(self.inner.tokenizer(lab, add_special_tokens=False)["input_ids"])
        return sum(self._label_len[lab] - 1 for lab in labels)

    def run(self, requests: list[Any]) -> list[Any]:
        stats0, keys0 = dict(self.inner.stats), set(self.inner._prefixes)
        out = self.inner.run(requests)
        encoded = sum(len(k[1]) for k in self.inner._prefixes if k not in keys0)
        reused = self.inner.stats["prefix_tokens_reused"] - stats0["prefix_tokens_reused"]
        fwd = self.inner.stats["forward_s"] - stats0["forward_s"]
        stages = {r.stage for r in requests}
        for r, resp in zip(requests, out):
            s = self.per_stage.setdefault(r.stage, dict.fromkeys(TOKEN_KEYS, 0))
            s["requests"] += 1
            s["prompt_tokens"] += resp.prompt_tokens
            s["generated_tokens"] += resp.completion_tokens
            if r.labels:
                s["label_tokens"] += self._extra_label_tokens(r.labels)
        # run_programs sends one stage per call; should several come together, charge the first.
        s = self.per_stage[requests[0].stage] if len(stages) == 1 else self.per_stage[sorted(stages)[0]]
        s["prefix_tokens_reused"] += reused
        s["model_prompt_tokens"] += self.inner.stats["prompt_tokens"] - stats0["prompt_tokens"]
        twins = self.inner.stats.get("twin_requests", 0) - stats0.get("twin_requests", 0)
        if twins:   # a twin is a label request of its stage: the same labels
            s["twin_requests"] += twins
            s["label_tokens"] += twins * self._extra_label_tokens(next(r.labels for r in requests if r.labels))
        s["prefix_tokens_encoded"] += encoded
        s["forward_s"] += fwd
        for st in stages:
            p = self.per_stage[st]
            p["computed_prompt_tokens"] = (p["model_prompt_tokens"] - p["prefix_tokens_reused"]
                                           + p["prefix_tokens_encoded"])
        return out

    def totals(self) -> dict[str, float]:
        return {k: sum(s[k] for s in self.per_stage.values()) for k in TOKEN_KEYS}


class LoadSampler:
    """Samples the 1-minute load average every few seconds while a run goes on."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s, self.samples = every_s, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        n = len(self.samples)
        return {"min": min(self.samples), "mean": sum(self.samples) / n, "max": max(self.samples), "n": n}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def adapter_dirs(root: str) -> dict[str, Path]:
    """``{stage: dir}`` of the stage adapters under ``root``; each must have ``adapter_model.safetensors``."""
    found = {s: Path(root) / s for s in ("stage1", "stage2", "stage3")}
    missing = [str(p) for p in found.values() if not (p / "adapter_model.safetensors").exists()]
    if missing:
        raise SystemExit(f"incomplete adapters (no adapter_model.safetensors): {', '.join(missing)}")
    return found


def legacy_report(args: argparse.Namespace, torch: Any, convs: list, runs: dict, load: tuple) -> None:
    """The original few-shot report (``score_throughput.md``), unchanged."""
    load_before, load_after = load
    turns = len(runs["batched"]["records"])
    lines = [
        "# Scoring throughput: batched vs one request at a time",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, no GPU; torch {torch.__version__}, "
        f"{args.dtype}, {torch.get_num_threads()} torch thread(s); model: embedded SmolLM2-135M-Instruct; "
        "few-shot prompts, label scoring for stages 2-3.",
        f"Input: `{Path(args.input).name}`, first {len(convs)} conversations, {turns} assistant turns. "
        f"Load average (1 min) before/after: {load_before[0]:.1f} / {load_after[0]:.1f} "
        "(other jobs were running on this shared machine; ratios from one run are comparable, absolute times less so).",
        "",
        "| mode | wall s | turns/s | prompt tokens | prefix tokens reused | speed-up vs authors |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    base = runs["authors"]["wall_s"]
    for name, r in runs.items():
        lines.append(f"| {name} | {r['wall_s']:.1f} | {turns / r['wall_s']:.3f} | {r['run'].get('prompt_tokens', 0)} | "
                     f"{r['run'].get('prefix_tokens_reused', 0)} | {base / r['wall_s']:.2f}x |")
    lines += [
        "",
        "Output agreement with the batched run:",
        "",
        "| mode | turns with same claims | claims with same category | turns with same verdicts "
        "| max stage-2 prob diff |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    result = {"input": args.input, "dtype": args.dtype, "turns": turns, "load": [load_before, load_after], "runs": {}}
    for name in ("single", "authors"):
        a = agreement(runs["batched"]["records"], runs[name]["records"])
        result["runs"][name] = {"wall_s": runs[name]["wall_s"], "agreement": a}
        lines.append(f"| {name} | {a['turns_same_claims']:.3f} | {a['claims_same_category']:.3f} | "
                     f"{a['turns_same_verdicts']:.3f} | {a['max_stage2_prob_diff']:.2g} |")
    result["runs"]["batched"] = {"wall_s": runs["batched"]["wall_s"]}
    lines += ["", "In float32 the three modes give identical claims, labels and verdicts (probabilities within 1e-4; "
              "`tests/test_transformers_backend.py`). In bfloat16 different batch shapes round differently, so a few "
              "near-tie outputs can differ; the table above measures how many."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=2))
    print("\n".join(lines))


def per_claim_rows(label: str, facts: dict, tot: dict) -> str:
    n = max(facts["scored_claims"], 1)
    share = tot["prefix_tokens_reused"] / tot["prompt_tokens"] if tot["prompt_tokens"] else 0.0
    return (f"| {label} | {facts['scored_turns']} | {facts['scored_claims']} | "
            f"{tot['prompt_tokens'] / n:.0f} | {tot['computed_prompt_tokens'] / n:.0f} | "
            f"{tot['generated_tokens'] / n:.1f} | {tot['label_tokens'] / n:.1f} | {share:.1%} |")


def stage_rows(label: str, per_stage: dict) -> list[str]:
    rows = []
    for st in sorted(per_stage):
        s = per_stage[st]
        n = max(s["requests"], 1)
        share = s["prefix_tokens_reused"] / s["prompt_tokens"] if s["prompt_tokens"] else 0.0
        rows.append(f"| {label} | {st} | {s['requests']} | {s['prompt_tokens'] / n:.0f} | "
                    f"{s['computed_prompt_tokens'] / n:.0f} | {s['generated_tokens'] / n:.1f} | "
                    f"{share:.1%} | {s['forward_s']:.1f} |")
    return rows


def _agreement(runs: dict, names: list[str], first: str) -> tuple[dict, list[str]]:
    """Each config's agreement with the first: the figures, and their table rows."""
    agree, lines = {}, []
    for n in names[1:]:
        a = agreement_detail(runs[first]["records"], runs[n]["records"])
        agree[n] = a
        st, nc = a["scored_turns"], a["claims_compared"]
        s2, cat = a["claims_same_stage2_label"], a["claims_same_category"]
        lines.append(f"| {n} | {a['turns_same_claims']}/{st} | {s2}/{nc} ({s2 / max(nc, 1):.0%}) | "
                     f"{cat}/{nc} ({cat / max(nc, 1):.0%}) | {a['turns_same_verdict_safe']}/{st} | "
                     f"{a['turns_same_verdict_strict']}/{st} |")
    return agree, lines


def _fewshot_lines(runs: dict, fewshot: dict, first: str) -> list[str]:
    """The few-shot base pipeline's per-stage rows and the tokens per scored claim, few-shot vs compact."""
    lines: list[str] = []
    lines += stage_rows("few-shot batched", fewshot["per_stage"])
    lines += ["", "## Tokens per scored claim: few-shot vs compact prompts", "",
              "Same inputs; all stages (stage 1 included) divided by the claims of scored turns. "
              "Few-shot: the paper's Appendix A.1 prompts on the bare base model (a second backend "
              "object, no adapters), batched with label scoring, prefix cache on; its wall time was "
              f"{fewshot['wall_s']:.1f} s. "
              "Computed prompt tokens = prompt tokens less those served from the prefix cache plus those "
              "encoded to fill it; label tokens = extra forward tokens of label scoring.", "",
              "| pipeline | scored turns | scored claims | prompt tokens / claim | "
              "computed prompt tokens / claim | generated tokens / claim | label tokens / claim | "
              "prefix-cache share |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
              per_claim_rows("few-shot (base model)", fewshot["facts"], fewshot["tokens"])]
    for n, r in runs.items():
        lines.append(per_claim_rows(f"compact `{n}`", r["facts"], r["tokens"]))
    fs = fewshot["tokens"]["prompt_tokens"] / max(fewshot["facts"]["scored_claims"], 1)
    cp = runs[first]["tokens"]["prompt_tokens"] / max(runs[first]["facts"]["scored_claims"], 1)
    lines += ["", f"Few-shot / compact prompt tokens per claim: {fs / cp:.1f}x (`{first}`)."]
    return lines


def detailed_report(args: argparse.Namespace, torch: Any, convs: list, runs: dict, fewshot: dict | None,
                    machine: dict, command: str) -> None:
    """Report of a student (or any non-default) comparison, with per-stage and per-claim token counts."""
    names = list(runs)
    first, base = names[0], names[-1]
    listed = ", ".join(f"{s}=`{p}`" for s, p in machine["adapters"].items())
    who = f"{args.style} prompts + LoRA adapters {listed}" if listed else f"{args.style} prompts, base model"
    lines = [
        f"# Scoring throughput: {'student pipeline' if machine['adapters'] else args.style + ' pipeline'}, "
        f"{' vs '.join(names)}",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} CPU cores, no GPU; torch {machine['torch']}, "
        f"{args.dtype}, {machine['threads']} torch thread(s). Model: embedded SmolLM2-135M-Instruct, {who}.",
        f"Input: `{args.input}`, first {len(convs)} conversations. Load average (1 min) over all runs: "
        f"min {machine['load']['min']:.2f}, mean {machine['load']['mean']:.2f}, "
        f"max {machine['load']['max']:.2f} "
        f"({machine['load']['n']} samples, every 5 s).",
        "",
        f"Command: `{command}`",
        "",
        "Configurations (same process, same backend object, same inputs):",
        "",
    ]
    for n in names:
        b, cache, mode = CONFIGS[n]
        how = "label scoring (likelihood)" if mode == "score" else "free generation, parsed"
        lines.append(f"* `{n}`: {'batched' if b else 'one request per call'}, "
                     f"prefix cache {'on' if cache else 'off'}, stages 2-3 {how}.")
    lines += ["", f"| config | wall s | turns/s | scored claims/s | turns | scored claims | prompt tokens | "
              f"computed prompt tokens | generated tokens | speed-up vs {base} |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    bw = runs[base]["wall_s"]
    for n, r in runs.items():
        f, t = r["facts"], r["tokens"]
        w = r["wall_s"]
        lines.append(f"| {n} | {w:.1f} | {f['turns'] / w:.3f} | {f['scored_claims'] / w:.3f} | "
                     f"{f['turns']} | {f['scored_claims']} | {t['prompt_tokens']} | "
                     f"{t['computed_prompt_tokens']} | {t['generated_tokens']} | {bw / w:.2f}x |")
    lines += ["", "Outputs (scored turns, safe rule):", "",
              "| config | scored turns | scored claims | unparsed claims | verdicts | claim categories |",
              "| --- | ---: | ---: | ---: | --- | --- |"]
    for n, r in runs.items():
        f = r["facts"]
        lines.append(f"| {n} | {f['scored_turns']} | {f['scored_claims']} | {f['unparsed_claims']} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(f['verdicts_safe'].items()))} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(f['categories'].items()))} |")
    lines += ["", f"Agreement with `{first}` (claim labels compared on the turns both decomposed into the "
              "same claims):", "",
              "| config | turns with same claims | claims with same stage-2 label | "
              "claims with same category | turns with same verdict (safe) | "
              "turns with same verdict (strict) |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    agree, rows = _agreement(runs, names, first)
    lines += rows
    lines += ["", "Per stage (means per request):", "",
              "| config | stage | requests | prompt tokens | computed prompt tokens | generated tokens | "
              "prefix-cache share | forward s |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, r in runs.items():
        lines += stage_rows(n, r["per_stage"])
    if fewshot is not None:
        lines += _fewshot_lines(runs, fewshot, first)
    result = {"command": command, "input": args.input, "limit": args.limit, "machine": machine,
              "runs": {n: {k: v for k, v in r.items() if k != "records"} for n, r in runs.items()},
              "ratio": {f"{n}_vs_{base}": bw / r["wall_s"] for n, r in runs.items()}, "agreement": agree,
              "fewshot": fewshot}
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=2))
    print("\n".join(lines))


def _measured_runs(args: argparse.Namespace, names: list[str], backend: Any,
                   convs: list) -> tuple[dict, dict | None, Any]:
    """Each config's run through a token counter (and the few-shot base pipeline's, with --fewshot-tokens), the
    load sampled throughout."""
    from vista_distill.backends.transformers import RepeatedLineStop, TransformersBackend
    from vista_distill.scorer import VistaScorer

    counter = StageCounter(backend)
    RepeatedLineStop(backend, 0)  # builds the backend's newline-token table once, outside the timed runs
    runs = {}
    with LoadSampler() as load:
        for name in names:
            batched, cache, mode = CONFIGS[name]
            scorer = VistaScorer(backend=counter, style=args.style, stage2=mode, stage3=mode)
            backend.use_prefix_cache = cache
            backend._prefixes.clear()
            counter.reset()
            t0 = time.perf_counter()
            res = scorer.score(convs, batched=batched)
            wall = time.perf_counter() - t0
            runs[name] = {"wall_s": wall, "records": res.records, "facts": run_facts(res.records),
                          "tokens": counter.totals(), "per_stage": counter.per_stage}
            print(name, f"{wall:.1f}s", runs[name]["facts"], flush=True)
        fewshot = None
        if args.fewshot_tokens:  # a second backend object: the bare base model, no adapters
            base = StageCounter(TransformersBackend(dtype=args.dtype))
            RepeatedLineStop(base.inner, 0)
            t0 = time.perf_counter()
            res = VistaScorer(backend=base, style="fewshot").score(convs, batched=True)
            fewshot = {"wall_s": time.perf_counter() - t0, "facts": run_facts(res.records),
                       "tokens": base.totals(), "per_stage": base.per_stage}
            print("few-shot", f"{fewshot['wall_s']:.1f}s", fewshot["facts"], flush=True)
    return runs, fewshot, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(DEFAULT_INPUT if DEFAULT_INPUT.exists() else SAMPLE))
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (1 avoids OpenMP stalls when other jobs share the cores)")
    ap.add_argument("--adapters", default=None,
                    help="folder with complete stage1/ stage2/ stage3/ LoRA adapters (the student pipeline)")
    ap.add_argument("--style", choices=("fewshot", "compact"), default=None,
                    help="prompt style (default: compact with --adapters, else fewshot)")
    ap.add_argument("--configs", default=",".join(LEGACY_CONFIGS),
                    help=f"comma-separated, from {', '.join(CONFIGS)}; the last is the speed-up baseline")
    ap.add_argument("--fewshot-tokens", action="store_true",
                    help="also run the few-shot base pipeline (batched, label scoring): tokens per claim")
    ap.add_argument("--out", default=None, help="report path (default: bench/results/score_throughput.md, or "
                                                "score_throughput_student.md with --adapters)")
    args = ap.parse_args()
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or not names:
        ap.error(f"unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
    args.style = args.style or ("compact" if args.adapters else "fewshot")
    legacy = (tuple(names) == LEGACY_CONFIGS and not args.adapters and args.style == "fewshot"
              and not args.fewshot_tokens)
    results = ROOT / "bench" / "results"
    args.out = args.out or str(results / ("score_throughput_student.md" if args.adapters
                                          else "score_throughput.md"))
    command = "python bench/score_throughput.py " + " ".join(
        a if " " not in a else repr(a) for a in __import__("sys").argv[1:])

    import torch

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.data.io import read_conversations
    from vista_distill.scorer import VistaScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    convs = read_conversations(args.input)[: args.limit]
    adapters = adapter_dirs(args.adapters) if args.adapters else None
    backend = TransformersBackend(adapters=adapters, dtype=args.dtype)
    if legacy:
        scorer = VistaScorer(backend=backend)
        load_before = os.getloadavg()
        runs = {}
        for name in names:
            batched, cache, _ = CONFIGS[name]
            backend.use_prefix_cache = cache
            backend._prefixes.clear()
            t0 = time.perf_counter()
            res = scorer.score(convs, batched=batched)
            runs[name] = {"wall_s": time.perf_counter() - t0, "records": res.records,
                          "run": res.summary["run"]}
            print(name, f"{runs[name]['wall_s']:.1f}s")
        legacy_report(args, torch, convs, runs, (load_before, os.getloadavg()))
        return

    runs, fewshot, load = _measured_runs(args, names, backend, convs)
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
               "torch": torch.__version__, "dtype": args.dtype, "platform": platform.platform(),
               "adapters": {s: str(p) for s, p in (adapters or {}).items()}, "load": load.summary(),
               "load_samples": load.samples}
    detailed_report(args, torch, convs, runs, fewshot, machine, command)


if __name__ == "__main__":
    main()
