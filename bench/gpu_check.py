"""python bench/gpu_check.py --silver runs/demo-cpu/silver --input tests/fixtures/vista_human/dev.json

Every GPU figure the docs plan with, in one command: Qwen3-8B's real architecture at random weights (config only,
no download; ``--layers/--hidden`` shrink it for the CPU test), the demo's silver data (or a tiny set made here from
the bundled sample when ``--silver`` is not given) and VISTA-dev-shaped inputs. Four parts, each in its own process
under its own time limit (``--part-limit``), so one that fails or runs out of time leaves the others' figures:

* ``train``: a few optimizer steps of ``qwen3-8b-lora-80gb`` (bf16 LoRA) and ``qwen3-8b-qlora-24gb`` (NF4 QLoRA) at
  the recipe's batch on the silver stage-2 rows lengthened to just under ``train.max_length``: tokens/s and peak
  memory beside ``vista-distill check``'s estimate for the same shape;
* ``score``: the student pipeline in process with three adapters, bf16 and NF4, over at least ``--turns`` turns
  after a warm-up conversation: seconds per turn, stage by stage, against the prefill bound (profile_scorer's);
* ``decode``: the 16-row stage-1 decode step (eager float32 / bf16 adapters, CUDA graphs, merged adapter, base)
  against the time the card takes to stream the weights once (its copy bandwidth measured in the same run);
* ``generate_batch``: transformers' continuous-batching ``generate_batch`` beside the slot decoder on the same
  stage-1 requests (base weights, greedy): outputs equal, and the time of each.

NF4 (bitsandbytes 4-bit) needs CUDA: on a CPU those halves record ``skipped: needs CUDA`` (bitsandbytes' CPU 4-bit
path is not what the recipes run). Writes one file, ``<out>/<card kind>.json`` (default out:
bench/results/gpu_check/), rewritten after every part. Random weights measure speed and memory only.

``--dry-run`` runs nothing: it packs the wheels a GPU machine without trl, datasets and bitsandbytes must carry
(rebuilt from this environment's installed distributions), checks they fit in 64 MiB, and prints the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECIPES = "recipes/qwen3-8b-lora-80gb.yaml,recipes/qwen3-8b-qlora-24gb.yaml"
PARTS = ("train", "score", "decode", "generate_batch")
LIMITS = "train=150,score=300,decode=90,generate_batch=90"   # seconds; about 11 minutes in all on an H200
CARRIED = ("trl", "datasets", "bitsandbytes")
CARRY_LIMIT = 64 * 2**20
# what the GPU image is known to hold (torch, transformers, peft, accelerate and their own requirements)
ON_GPU_IMAGE = {"torch", "transformers", "peft", "accelerate", "numpy", "packaging", "pyyaml", "huggingface-hub",
                "jinja2", "psutil", "filelock", "fsspec", "tqdm", "safetensors", "tokenizers", "regex", "requests"}
REFERENCE = "REFERENCE TEXT:\n"
SYSTEM = ("You split an assistant's turn into atomic claims, one per line, each a short sentence that can be checked "
          "on its own against a reference text.")
TOPICS = ["the Eiffel Tower", "jazz in New Orleans", "the Amazon river", "photosynthesis", "the Roman Empire",
          "Mount Everest", "the printing press", "honey bees", "the Moon landing", "coffee", "the violin",
          "volcanoes", "chess openings", "the Great Barrier Reef", "electric cars", "the Silk Road"]


# --- the random model, its adapters, long silver rows, check's estimates and the decode settings
# (results/gpu_random_8b/ holds the figures measured with them before this script)


def long_silver(src: Path, dst: Path, tokenizer: Any, max_length: int, rows: int, margin: int = 24) -> dict:
    """Stage-2 silver rows whose reference is lengthened (its own words, cycled) so that the whole chat
    (prompt + completion) is ``max_length - margin`` tokens or a little less; saved as a silver set."""
    from datasets import DatasetDict, load_from_disk

    dd = load_from_disk(str(src / "stage2"))

    def length(prompt: list[dict], completion: list[dict]) -> int:
        return len(tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)["input_ids"])

    def lengthen(row: dict) -> dict:
        user = next(m for m in row["prompt"] if m["role"] == "user")
        head, _, rest = user["content"].partition(REFERENCE)
        ref, sep, tail = rest.partition("\n\n")
        words = ref.split() or ["reference"]
        lo, hi = 0, 4 * max_length
        while lo < hi:   # the most words whose chat still fits
            mid = (lo + hi + 1) // 2
            text = " ".join(words[i % len(words)] for i in range(mid))
            msgs = [dict(m, content=head + REFERENCE + text + sep + tail) if m is user else m for m in row["prompt"]]
            if length(msgs, row["completion"]) <= max_length - margin:
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[i % len(words)] for i in range(lo))
        return {"prompt": [dict(m, content=head + REFERENCE + text + sep + tail) if m is user else m
                           for m in row["prompt"]]}

    def rows_of(split: str, n: int):   # cycled when the set is smaller than the steps need
        d = dd[split]
        return d.select([i % len(d) for i in range(n)])

    held = next((s for s in dd if s != "train"), None)   # the held-out split, as the silver set names it
    splits = (("train", rows),) + (((held, 8),) if held else ())
    out = DatasetDict({split: rows_of(split, n).map(lengthen) for split, n in splits})
    out.save_to_disk(str(dst / "stage2"))
    lens = [length(r["prompt"], r["completion"]) for r in out["train"]]
    return {"rows": len(lens), "tokens_min": min(lens), "tokens_max": max(lens)}


def make_adapters(model_dir: str, recipe: str, dst: Path) -> None:
    """Three LoRA adapters (stage1-3) of the recipe's LoRA settings on the model, PEFT's own initialisation
    with B drawn at random too (so each adapter changes the output, as trained ones do)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vista_distill.config import load_recipe

    lo = load_recipe(recipe).lora
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    tok = AutoTokenizer.from_pretrained(model_dir)
    for i, stage in enumerate(("stage1", "stage2", "stage3")):
        torch.manual_seed(i)
        cfg = LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                         task_type="CAUSAL_LM", init_lora_weights=False)
        peft = get_peft_model(model, cfg)
        with torch.no_grad():   # small B: outputs move, as after training, without blowing up
            for n, p in peft.named_parameters():
                if "lora_B" in n:
                    p.mul_(1e-3)
        peft.save_pretrained(dst / stage)
        tok.save_pretrained(dst / stage)
        model = peft.unload()


def estimates(model_dir: str, recipe: str, tokens_per_step: float | None, overrides: list[str] = ()) -> dict:
    """``vista-distill check``'s training estimate at the recipe's shape and at the measured tokens per step."""
    from vista_distill.check.gpu_memory import Shape, training_estimate
    from vista_distill.config import load_recipe

    r = load_recipe(recipe, list(overrides))
    shape = Shape.from_config(json.loads((Path(model_dir) / "config.json").read_text()))
    t = r.for_stage("stage2").train
    kw = dict(load_in_4bit=r.student.load_in_4bit, r=r.lora.r, targets=r.lora.target_modules,
              checkpointing=t.gradient_checkpointing, optim=str(t.options.get("optim", "")))
    out = {"recipe_shape": [t.per_device_train_batch_size, t.max_length],
           "recipe_gib": round(training_estimate(shape, batch=t.per_device_train_batch_size, length=t.max_length,
                                                 **kw).total, 2)}
    if tokens_per_step:
        length = round(tokens_per_step / (t.per_device_train_batch_size * t.gradient_accumulation_steps))
        out.update(measured_shape=[t.per_device_train_batch_size, length],
                   measured_shape_gib=round(training_estimate(shape, batch=t.per_device_train_batch_size,
                                                              length=length, **kw).total, 2))
    return out


def read_bandwidth(device: str, gib: float = 2.0) -> float:
    """Bytes/s the card reads in a device-to-device copy (read plus write bytes over its time, the median of 5)."""
    import torch

    n = int(gib * 2**30)
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return 2 * n / sorted(times)[2]


def decode_rows(backend: Any, requests: list[Any], stream_ms: float | None) -> list[dict]:
    """Each setting's decode of ``requests`` (adapter precision, CUDA graphs, merged adapter, base model): its wall
    time per decode step and whether its texts are the first and the previous setting's."""
    import torch

    from vista_distill.backends.adapters import adapters_in_dtype

    on_gpu = backend.device.startswith("cuda")
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    settings = [("eager, float32 adapters", torch.float32, False, ""),
                ("eager, bf16 adapters", torch.bfloat16, False, ""),
                ("CUDA graphs, bf16 adapters", torch.bfloat16, True, ""),
                ("CUDA graphs, adapter merged", torch.bfloat16, True, "merged"),
                ("CUDA graphs, base model", torch.bfloat16, True, "base")]
    first: list[str] | None = None
    previous: list[str] | None = None
    rows = []
    for name, adapter_dtype, graphs, variant in settings:
        adapters_in_dtype(backend.model, adapter_dtype)
        backend.cuda_graphs = graphs
        reqs = [dataclasses.replace(r, stage="stage4") for r in requests] if variant == "base" else requests
        if variant == "merged":
            backend.model.set_adapter("stage1")
            backend.model.merge_adapter(["stage1"])
        backend.run(reqs[:2])   # warm-up: kernels, allocator, the prefix cache
        steps0 = backend.stats["decode_steps"]
        sync()
        t = time.perf_counter()
        responses = backend.run(reqs)
        sync()
        wall = time.perf_counter() - t
        if variant == "merged":
            backend.model.unmerge_adapter()
        steps = backend.stats["decode_steps"] - steps0
        texts = [r.text for r in responses]
        first = first or texts
        row = {"setting": name + (" (eager on a CPU)" if graphs and not on_gpu else ""), "wall_s": round(wall, 3),
               "decode_steps": steps, "ms_per_step": round(1e3 * wall / max(steps, 1), 2),
               "generated_tokens": sum(r.completion_tokens for r in responses),
               "same_text_as_first_setting": sum(x == y for x, y in zip(texts, first)),
               "same_text_as_previous_setting": sum(x == y for x, y in zip(texts, previous or texts)),
               "over_weights_stream": None, "peak_cuda_gib": None}
        previous = texts
        if stream_ms:
            row["over_weights_stream"] = round(row["ms_per_step"] / stream_ms, 2)
            row["peak_cuda_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        rows.append(row)
    return rows


# --- the parts, each run in a child process (``--_part``) that prints one RESULT line


def _overrides(a: argparse.Namespace) -> list[str]:
    """The training part's recipe overrides (``--train-override``, the CPU test's smaller shapes)."""
    return [o for ov in a.train_override for o in ov.split(";") if o]


def part_train(a: argparse.Namespace, model_dir: str, work: Path) -> dict:
    """Optimizer steps of every recipe on the lengthened silver rows: tokens/s, peak memory, check's estimate."""
    import torch
    from train_throughput import run_variant
    from transformers import AutoTokenizer

    from vista_distill.config import load_recipe

    out: dict = {}
    for recipe in a.recipes.split(","):
        name, ov = Path(recipe).stem, _overrides(a)
        if load_recipe(recipe, ov).student.load_in_4bit and not torch.cuda.is_available():
            out[name] = {"status": "skipped: needs CUDA (bitsandbytes NF4)", "estimate": estimates(model_dir, recipe,
                                                                                                   None, ov)}
            continue
        t = load_recipe(recipe, ov).for_stage("stage2").train
        silver = work / f"silver-long-{t.max_length}"
        rows = t.per_device_train_batch_size * t.gradient_accumulation_steps * (a.steps + 1)
        shape = long_silver(Path(a.silver), silver, AutoTokenizer.from_pretrained(model_dir), t.max_length, rows)
        row = run_variant(recipe, str(silver), "stage2", ov, a.steps, 1, model_dir)
        out[name] = {"status": "ok", "silver": shape, "result": row,
                     "estimate": estimates(model_dir, recipe, row["tokens_per_step"], ov)}
    return out


def _turns(path: str, turns: int) -> tuple[list, list]:
    """(one warm-up conversation, then conversations holding at least ``turns`` scored turns), cycled."""
    from vista_distill.data.io import read_conversations

    convs = read_conversations(path)
    picked, n, i = [], 0, 1
    while n < turns:
        c = convs[i % len(convs)]
        picked.append(dataclasses.replace(c, id=f"{c.id}#{i}"))
        n += len(c.scored_turns)
        i += 1
    return convs[:1], picked


def part_score(a: argparse.Namespace, model_dir: str, work: Path) -> dict:
    """The student pipeline in process, bf16 and NF4, warm: seconds per turn, per stage, against the bound."""
    import torch
    from profile_scorer import profile_pipeline

    from vista_distill.backends.transformers import TransformersBackend
    from vista_distill.scorer import VistaScorer

    warm, convs = _turns(a.input, a.turns)
    out: dict = {}
    for name, q in (("bf16", False), ("nf4", True)):
        if q and not torch.cuda.is_available():
            out[name] = {"status": "skipped: needs CUDA (bitsandbytes NF4)"}
            continue
        backend = TransformersBackend(model_dir, adapters=work / "adapters", dtype="bfloat16", threads=a.threads,
                                      batch_size=16, load_in_4bit=q)
        scorer = VistaScorer(backend=backend)
        t = time.perf_counter()
        scorer.score(warm)
        warm_s = time.perf_counter() - t
        p = profile_pipeline("student", scorer, convs, a.threads, cprofile=False)
        keep = ("wall_s", "scored_turns", "s_per_turn", "bound_s_per_turn", "wall_over_bound",
                "bound_at_context", "bound_at_context_s_per_turn", "wall_over_bound_at_context",
                "per_stage", "decoding", "peak_cuda_gib",
                "floor", "dtype", "forward_tokens_per_s")
        out[name] = {"status": "ok", "warmup_s": round(warm_s, 1),
                     **{k: p[k] for k in keep}}
        del scorer, backend
    return out


def _requests(rows: int, tokens: int, stop_on_repeat: bool) -> list:
    from vista_distill.pipeline.protocol import Request

    return [Request("stage1", ({"role": "system", "content": SYSTEM},
                               {"role": "user", "content": f"Turn: Here is what I know about {TOPICS[i % 16]}."}),
                    max_new_tokens=tokens, stop_on_repeat=stop_on_repeat) for i in range(rows)]


def part_decode(a: argparse.Namespace, model_dir: str, work: Path) -> dict:
    """The stage-1 decode step against the weights' streaming time (bandwidth measured here on a GPU)."""
    from vista_distill.backends.transformers import TransformersBackend

    backend = TransformersBackend(model_dir, adapters=work / "adapters", dtype="bfloat16", threads=a.threads,
                                  batch_size=a.rows)
    weight_bytes = sum(p.numel() * p.element_size() for n, p in backend.model.named_parameters() if "lora_" not in n)
    out: dict = {"rows": a.rows, "tokens": a.tokens, "weights_gib": round(weight_bytes / 2**30, 3),
                 "read_bandwidth_tb_s": None, "weights_stream_ms": None}
    if backend.device.startswith("cuda"):
        bw = read_bandwidth(backend.device)
        out.update(read_bandwidth_tb_s=round(bw / 1e12, 2), weights_stream_ms=round(1e3 * weight_bytes / bw, 2))
    out["settings"] = decode_rows(backend, _requests(a.rows, a.tokens, True), out["weights_stream_ms"])
    return {"status": "ok", **out}


def part_generate_batch(a: argparse.Namespace, model_dir: str, work: Path) -> dict:
    """transformers' ``generate_batch`` beside the slot decoder, base weights, greedy, the same stage-1 requests."""
    import torch
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    from vista_distill.backends.transformers import TransformersBackend

    backend = TransformersBackend(model_dir, dtype="bfloat16", threads=a.threads, batch_size=a.rows)
    reqs = _requests(a.rows, a.tokens, False)
    sync = torch.cuda.synchronize if backend.device.startswith("cuda") else (lambda: None)
    backend.run(reqs[:2])
    sync()
    t = time.perf_counter()
    slots = [r.text for r in backend.run(reqs)]
    sync()
    slot_s = time.perf_counter() - t
    model = getattr(backend.model, "get_base_model", lambda: backend.model)()
    if not hasattr(model, "generate_batch"):
        return {"status": "skipped: this transformers has no generate_batch", "slot_s": round(slot_s, 3)}
    ids = [[*prefix, *suffix] for prefix, suffix in map(backend._encode, reqs)]
    tok = backend.tokenizer
    cfg = GenerationConfig(max_new_tokens=a.tokens, do_sample=False, eos_token_id=tok.eos_token_id,
                           pad_token_id=tok.pad_token_id or tok.eos_token_id)
    attn = model.config._attn_implementation
    # its paged cache sized to these requests (by default it takes most of the free memory: a CPU host's RAM)
    longest = max(map(len, ids)) + a.tokens
    cb = ContinuousBatchingConfig(num_blocks=a.rows * (-(-longest // 256) + 1), max_batch_tokens=sum(map(len, ids)))
    try:
        if attn not in ("sdpa", "eager") and "flash" not in attn:   # the backend's own kernel: not paged
            model.set_attn_implementation("sdpa")
        if backend.device.startswith("cuda"):   # warm-up: captures its graphs (on a CPU only its own polling)
            model.generate_batch(ids[:2], generation_config=cfg, continuous_batching_config=cb)
        sync()
        t = time.perf_counter()
        res = model.generate_batch(ids, generation_config=cfg, continuous_batching_config=cb)
        sync()
    except Exception as err:   # noqa: BLE001 - the part records why it could not run
        return {"status": f"failed: generate_batch: {type(err).__name__}: {str(err)[:300]}",
                "slot_s": round(slot_s, 3), "slot_attention": attn}
    cb_s = time.perf_counter() - t
    outs = [res[k].generated_tokens for k in sorted(res, key=lambda k: int(re.sub(r"\D", "", k) or 0))]
    texts = [tok.decode(o, skip_special_tokens=True).strip() for o in outs]
    return {"status": "ok", "rows": a.rows, "tokens": a.tokens, "slot_attention": attn,
            "generate_batch_attention": model.config._attn_implementation, "cache_blocks": cb.num_blocks,
            "slot_s": round(slot_s, 3),
            "generate_batch_s": round(cb_s, 3), "generate_batch_over_slots": round(cb_s / max(slot_s, 1e-9), 2),
            "same_text": sum(x.strip() == y for x, y in zip(slots, texts)),
            "generated_tokens": sum(len(o) for o in outs)}


# --- the parent: the model, the inputs, each part in its own process, the result file


def part_limit(spec: str, part: str) -> float:
    """``part``'s seconds from ``--part-limit``: one number for every part, or ``part=seconds,...``."""
    if "=" not in spec:
        return float(spec)
    return float(dict(kv.split("=", 1) for kv in spec.split(","))[part])


def run_part(part: str, a: argparse.Namespace, log: Path) -> dict:
    """``part`` in its own process group under its ``--part-limit`` (its children go with it on a timeout)."""
    cmd = [sys.executable, __file__, *sys.argv[1:], "--_part", part]
    limit = part_limit(a.part_limit, part)
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=True,
                                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        try:
            stdout, _ = proc.communicate(timeout=limit)
            rc: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, _ = proc.communicate()
            rc = "timeout"
    line = next((ln for ln in (stdout or "").splitlines() if ln.startswith("RESULT ")), None)
    out = json.loads(line[7:]) if line and rc == 0 else {}
    if rc != 0:
        tail = log.read_text()[-1500:]
        out = {"status": f"timeout after {limit:.0f} s" if rc == "timeout" else f"failed: rc={rc}",
               "log_tail": tail}
    out["part_s"] = round(time.perf_counter() - t, 1)
    print(f"{part}: {out.get('status', 'ok')} in {out['part_s']} s", flush=True)
    return out


def card_kind() -> str:
    """The result file's name: the GPU's name (``nvidia-h200``), or the CPU kind where none is."""
    import torch

    if torch.cuda.is_available():
        return "-".join(re.findall(r"[a-z0-9]+", torch.cuda.get_device_name(0).lower()))
    from harness import machine, result_name

    return "cpu-" + result_name(machine())


def prepare(a: argparse.Namespace, work: Path) -> dict:
    """The random model, its three adapters and (when ``--silver`` is not given) a tiny silver set; all reused
    from ``--work`` when an earlier run of the same shape made them there (a second command, other ``--parts``)."""
    from train_throughput import random_model

    t = time.perf_counter()
    spec = json.dumps([a.arch, a.layers, a.hidden, a.tokenizer, a.recipes.split(",")[0]])
    done = work / "prepared.json"
    if done.exists() and json.loads(done.read_text())["spec"] == spec:
        return {**json.loads(done.read_text())["made"], "prepare_s": round(time.perf_counter() - t, 1),
                "reused": True}
    model_dir, note = random_model(a.arch, work / f"rand-{a.arch}", a.layers, a.hidden, a.tokenizer)
    make_adapters(model_dir, a.recipes.split(",")[0], work / "adapters")
    if not a.silver:
        import yaml

        from vista_distill.config import load_recipe
        from vista_distill.distill.run import run_distill

        recipe = {"name": "gpu-check-silver", "teacher": {"backend": "labels"},
                  "data": {"train": [{"benchmark": "vista-human", "source": str(ROOT / "data" / "samples" /
                                                                                 "sample_dialogues.json")}]},
                  "distill": {"output_dir": str(work / "silver"), "validation_fraction": 0.34}}
        (work / "silver.yaml").write_text(yaml.safe_dump(recipe))
        run_distill(load_recipe(work / "silver.yaml"), progress=False)
    made = {"model": note, "model_dir": model_dir, "silver": a.silver or "tiny: the bundled sample, labels teacher"}
    done.write_text(json.dumps({"spec": spec, "made": made}))
    return {**made, "prepare_s": round(time.perf_counter() - t, 1), "reused": False}


def pack_wheel(name: str, dst: Path) -> tuple[Path, list[str]]:
    """A wheel of the installed distribution ``name`` rebuilt from its RECORD (bytecode and installer files left
    out), its tag from its own WHEEL file; returns (path, its requirements without extras)."""
    import importlib.metadata as md

    dist = md.distribution(name)
    info = next(f for f in dist.files if str(f).endswith(".dist-info/WHEEL"))
    tag = next(ln.split(": ", 1)[1] for ln in Path(info.locate()).read_text().splitlines() if ln.startswith("Tag: "))
    path = dst / f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}-{tag}.whl"
    skip = re.compile(r"(__pycache__/|\.pyc$|\.dist-info/(INSTALLER|REQUESTED|direct_url\.json)$)")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in dist.files:
            src = Path(f.locate())
            if src.is_file() and not skip.search(str(f)) and not str(f).startswith(".."):
                z.write(src, str(f))
    reqs = sorted({re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0] for r in dist.requires or [] if "extra ==" not in r})
    return path, reqs


def dry_run(a: argparse.Namespace) -> dict:
    """The wheels to carry, their total size against the 64 MiB limit, and the command to run on the GPU."""
    dst = Path(a.wheels)
    dst.mkdir(parents=True, exist_ok=True)
    wheels, requires = [], {}
    for name in (*CARRIED, *[n for n in a.also.split(",") if n]):
        path, reqs = pack_wheel(name, dst)
        wheels.append({"name": name, "wheel": path.name, "mib": round(path.stat().st_size / 2**20, 2)})
        requires[name] = reqs
    silver = sum(f.stat().st_size for f in Path(a.silver).rglob("*") if f.is_file()) if a.silver else 0
    total = sum((dst / w["wheel"]).stat().st_size for w in wheels) + silver   # all that is carried
    rel = os.path.relpath(dst, ROOT) if dst.resolve().is_relative_to(ROOT) else str(dst)
    run = "python bench/gpu_check.py" + (f" --silver {a.silver}" if a.silver else "") + f" --input {a.input}"
    install = f"pip install --no-deps {rel}/*.whl"
    # two commands, each within a device command's 10 minutes; the second adds its parts to the same result file
    commands = [f"{install} && {run} --turns {a.turns} --parts train,score",
                f"{install} && {run} --parts decode,generate_batch"]
    return {"wheels": wheels, "silver_mib": round(silver / 2**20, 2),
            "total_mib": round(total / 2**20, 2), "limit_mib": CARRY_LIMIT // 2**20,
            "within_limit": total <= CARRY_LIMIT, "carry": [rel] + ([a.silver] if a.silver else []),
            "their_requirements": requires, "commands": commands,
            "requirements_not_known_on_the_gpu_image": sorted(
                {r.lower().replace("_", "-") for rs in requires.values() for r in rs} - ON_GPU_IMAGE
                - {n.lower() for n in (*CARRIED, *a.also.split(","))})}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="qwen3-8b")
    ap.add_argument("--recipes", default=RECIPES, help="the training parts' recipes; the first one's LoRA settings "
                    "make the adapters")
    ap.add_argument("--silver", default=None, help="a silver folder (stage2/ is used), e.g. the demo's; default: a "
                    "tiny one made from the bundled sample")
    ap.add_argument("--input", default="tests/fixtures/vista_human/dev.json", help="VISTA-dev-shaped conversations")
    ap.add_argument("--turns", type=int, default=40, help="scored turns per scoring run, after a warm-up conversation")
    ap.add_argument("--steps", type=int, default=3, help="measured optimizer steps (one more warms up)")
    ap.add_argument("--rows", type=int, default=16, help="stage-1 requests decoded at once (the recipes' eval batch)")
    ap.add_argument("--tokens", type=int, default=128, help="tokens each stage-1 request decodes")
    ap.add_argument("--threads", type=int, default=2, help="torch threads on a CPU")
    ap.add_argument("--parts", default=",".join(PARTS), help="in order, any of " + ", ".join(PARTS))
    ap.add_argument("--part-limit", default=LIMITS, help="seconds a part may run: one number, or part=seconds,...")
    ap.add_argument("--work", default="/tmp/gpu_check")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpu_check"))
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded model's)")
    ap.add_argument("--layers", type=int, help="fewer layers (the CPU test)")
    ap.add_argument("--hidden", type=int, help="smaller hidden size (the CPU test)")
    ap.add_argument("--train-override", action="append", default=[],
                    help="recipe overrides for the training part, ';' between them (CPU test: smaller shapes)")
    ap.add_argument("--dry-run", action="store_true", help="pack the wheels to carry, check 64 MiB, print the command")
    ap.add_argument("--wheels", default=str(ROOT / ".gpu_wheels"), help="where --dry-run packs the wheels")
    ap.add_argument("--also", default="", help="more installed distributions for --dry-run to pack (comma-separated), "
                    "e.g. datasets' requirements where the GPU image lacks them")
    ap.add_argument("--_part", help=argparse.SUPPRESS)
    return ap


def main() -> None:
    a = _parser().parse_args()
    if a.dry_run:
        print(json.dumps(dry_run(a), indent=2))
        return
    work = Path(a.work)
    if a._part:   # child: one part, its figures on one line
        a.silver = a.silver or str(work / "silver")
        fn = {"train": part_train, "score": part_score, "decode": part_decode,
              "generate_batch": part_generate_batch}[a._part]
        print("RESULT " + json.dumps(fn(a, str(work / f"rand-{a.arch}"), work), default=str), flush=True)
        return
    import torch

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "card": card_kind(),
                    "command": "python bench/gpu_check.py " + " ".join(sys.argv[1:]), "arch": a.arch,
                    **prepare(a, work), "parts": {}}
    path = Path(a.out) / f"{result['card']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():   # the parts an earlier command (other --parts) measured on this card stay
        earlier = json.loads(path.read_text())
        result["parts"] = earlier.get("parts", {})
        result["earlier_commands"] = [*earlier.get("earlier_commands", []), earlier["command"]]
    for part in a.parts.split(","):
        result["parts"][part] = run_part(part, a, work / f"{part}.log")
        result["total_s"] = round(time.perf_counter() - t0, 1)
        path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(path)


if __name__ == "__main__":
    main()
