"""The machine a run uses, and the precision and thread count chosen for it.

``auto`` (the default everywhere) means: bfloat16 where the device computes it natively — a CUDA GPU
that torch says supports bf16, or a CPU with AMX tiles or AVX512-BF16 as torch reports them, where a bf16 matmul
also measures at least as fast as a float32 one (:func:`measured_bf16_speedup`, once per machine) —
float16 on other GPUs, float32 otherwise. On a CPU without native bf16 every bf16 matmul is emulated:
``bench/hardware.py`` measured it 50-65x slower than float32 on an AVX2-only AMD EPYC. An explicit
choice is honoured; an explicit bf16 (or fp16) on such a CPU warns once with that cost.

Threads: ``auto`` takes the CPUs this process may use less those busy with other work (CPU time of the whole machine
sampled for half a second from /proc/stat, else the load average), at least one: on a 2-core machine with another job
running one thread is several times faster than two that fight for a core. ``OMP_NUM_THREADS`` set by the user counts as
an explicit choice.

The choice functions take the capability as an argument, so they are tested for every device kind;
:func:`detect` asks torch once per process.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DTYPES = ("bfloat16", "float16", "float32")
ALIASES = {"auto": "auto", "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
           "half": "float16", "fp32": "float32", "float32": "float32", "float": "float32"}
# Measured by bench/hardware.py (bench/results/hardware_*.md); quoted in the warning below.
EMULATED_BF16_NOTE = ("bf16 matmuls are emulated on this CPU; bench/hardware.py measured them about 50-65x "
                      "slower than float32 on an AVX2-only AMD EPYC")


@dataclass(frozen=True)
class Capability:
    """What torch reports about the device a run computes on."""

    device: str                       # cuda | mps | cpu
    name: str = ""                    # GPU name or CPU model name
    cpu_capability: str = ""          # torch.backends.cpu.get_cpu_capability(): DEFAULT, AVX2, AVX512, ...
    cpu_amx_tile: bool = False        # torch.cpu._is_amx_tile_supported()
    cpu_avx512_bf16: bool = False     # torch.cpu._is_avx512_bf16_supported()
    cuda_bf16: bool = False           # torch.cuda.is_bf16_supported()
    cpu_bf16_speedup: float | None = None   # measured on a CPU with native bf16: a bf16 matmul's rate / float32's

    @property
    def native_bf16(self) -> bool:
        if self.device == "cuda":
            return self.cuda_bf16
        if self.device == "cpu":
            return self.cpu_amx_tile or self.cpu_avx512_bf16
        return False

    @property
    def cpu_isa(self) -> str:
        """The best matmul instruction set torch reports: AMX, AVX512-BF16, AVX512, AVX2, ..."""
        if self.cpu_amx_tile:
            return "AMX"
        if self.cpu_avx512_bf16:
            return "AVX512-BF16"
        return self.cpu_capability or "unknown"

    def describe(self) -> str:
        if self.device == "cpu":
            native = "native bf16" if self.native_bf16 else "no AMX or AVX512-BF16"
            return f"CPU {self.name or 'unknown'} (torch: {self.cpu_isa}; {native})"
        if self.device == "cuda":
            return f"GPU {self.name or 'cuda'} ({'bf16 supported' if self.cuda_bf16 else 'no bf16'})"
        return f"{self.device} {self.name}".strip()


@dataclass(frozen=True)
class PrecisionChoice:
    dtype: str                        # bfloat16 | float16 | float32
    requested: str
    reason: str
    native: bool = True               # False: the device emulates this dtype (slow)

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    requested: str
    reason: str
    cores: int = 0
    load: float | None = None


def normalize_dtype(value: str | None, where: str = "dtype") -> str:
    """``auto`` or one of :data:`DTYPES` (aliases such as ``bf16`` accepted); an error names ``where``."""
    key = "auto" if value is None else str(value).strip().lower()
    if key not in ALIASES:
        raise ValueError(f"{where}: {value!r} is not a precision; expected auto, bfloat16, float16 or float32")
    return ALIASES[key]


def choose_dtype(requested: str | None, cap: Capability, where: str = "dtype") -> PrecisionChoice:
    """The dtype to compute in on the device ``cap`` describes (see the module docstring)."""
    want = normalize_dtype(requested, where)
    if want == "auto":
        if cap.device == "cuda":
            dtype = "bfloat16" if cap.cuda_bf16 else "float16"
            why = "GPU supports bf16" if cap.cuda_bf16 else "GPU without bf16"
        elif cap.device == "mps":
            dtype, why = "float16", "Apple GPU (MPS) without reported bf16"
        elif cap.native_bf16:
            isa, x = "AMX" if cap.cpu_amx_tile else "AVX512-BF16", cap.cpu_bf16_speedup
            if x is None or x >= 1.0:
                dtype = "bfloat16"
                rate = "" if x is None else f"; a bf16 matmul {x:.1f}x float32's rate here"
                why = f"CPU computes bf16 natively ({isa}{rate})"
            else:
                dtype = "float32"
                why = (f"CPU has {isa}, but a bf16 matmul ran at {x:.2f}x float32's rate here "
                       "(runtime.hardware.bf16_matmul_speedup)")
        else:
            dtype, why = "float32", "CPU has no native bf16 (no AMX or AVX512-BF16); bf16 would be emulated"
        return PrecisionChoice(dtype, "auto", f"auto: {why}", True)
    native = not (cap.device == "cpu" and want in ("bfloat16", "float16") and not cap.native_bf16)
    if want == "float16" and cap.device == "cpu":
        native = False
    return PrecisionChoice(want, want, f"{where}={want} as requested", native)


_warned: set[tuple[str, str]] = set()


def warn_if_emulated(choice: PrecisionChoice, cap: Capability) -> None:
    """One warning per process and dtype when an explicit choice is emulated on this CPU."""
    if choice.native or (choice.dtype, cap.device) in _warned:
        return
    _warned.add((choice.dtype, cap.device))
    cost = EMULATED_BF16_NOTE if choice.dtype == "bfloat16" else "float16 matmuls are emulated on CPUs and slow"
    log.warning("%s requested on %s: %s. Use auto or float32 to run at full speed.",
                choice.dtype, cap.describe(), cost)


def cpu_model_name() -> str:
    """The CPU's model name as ``lscpu`` shows it (from /proc/cpuinfo; platform fallback)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags(wanted: tuple[str, ...] = ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_vnni",
                                         "amx_tile", "amx_bf16", "amx_int8")) -> list[str]:
    """The CPU flags that matter for matmul speed, as /proc/cpuinfo lists them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in wanted if f in have]
    except OSError:
        pass
    return []


def bf16_matmul_speedup(tokens: int = 512, k: int = 576, n: int = 1536, repeats: int = 5) -> float:
    """A bf16 matmul's rate over float32's on this CPU: the best of ``repeats`` products of a ``tokens`` x ``k``
    input with an ``n`` x ``k`` weight (the embedded model's MLP), alternating, after a warm-up; about 30 ms.
    AVX512-BF16 alone does not make bf16 the faster one: a 2-core Intel Xeon that reports it (no AMX) ran bf16
    matmuls at 0.5-0.6x float32's rate, and the demo trained 1.4x slower than on an AMD EPYC with it
    (bench/results/hardware_intel-xeon-avx512-bf16.md)."""
    import time

    import torch

    x, w = torch.randn(tokens, k), torch.randn(n, k)
    pairs = {torch.float32: (x, w), torch.bfloat16: (x.bfloat16(), w.bfloat16())}
    best = {dtype: float("inf") for dtype in pairs}
    with torch.inference_mode():
        for a, b in pairs.values():   # warm-up
            torch.nn.functional.linear(a, b)
        for _ in range(repeats):   # alternated, so that other work on the machine weighs on both alike
            for dtype, (a, b) in pairs.items():
                t = time.perf_counter()
                torch.nn.functional.linear(a, b)
                best[dtype] = min(best[dtype], time.perf_counter() - t)
    return best[torch.float32] / best[torch.bfloat16]


BF16_SPEEDUP_FILE = "bf16_speedup.json"


@functools.lru_cache(maxsize=1)
def measured_bf16_speedup() -> float:
    """:func:`bf16_matmul_speedup` of this machine, measured once and kept in the cache folder by CPU, flags, torch
    version and threads, so that every process (training, evaluation, a second run) reads the same figure and
    makes the same choice, and a run's manifest does not change with the measurement's noise."""
    import json

    import torch

    from .cache import cache_dir, cache_lock

    key = "|".join([cpu_model_name(), ",".join(cpu_flags()), torch.__version__, str(torch.get_num_threads())])
    path = cache_dir() / BF16_SPEEDUP_FILE
    try:
        with cache_lock(BF16_SPEEDUP_FILE):
            try:
                known = json.loads(path.read_text())
            except (OSError, ValueError):
                known = {}
            if key not in known:
                known[key] = round(bf16_matmul_speedup(), 2)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(known, indent=1) + "\n")
                os.replace(tmp, path)
            return float(known[key])
    except OSError as e:   # a cache folder that cannot be written: this process measures for itself
        log.debug("bf16 measurement not kept (%s)", e)
        return round(bf16_matmul_speedup(), 2)


def _cpu_capability(device: str) -> Capability:
    import torch

    def probe(fn: str) -> bool:
        f = getattr(torch.cpu, fn, None)
        try:
            return bool(f()) if f is not None else False
        except Exception:  # noqa: BLE001 - a probe that fails means "not supported"
            return False

    amx, avx512_bf16 = probe("_is_amx_tile_supported"), probe("_is_avx512_bf16_supported")
    speedup = measured_bf16_speedup() if device == "cpu" and (amx or avx512_bf16) else None
    return Capability(device=device, name=cpu_model_name(),
                      cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
                      cpu_amx_tile=amx, cpu_avx512_bf16=avx512_bf16, cpu_bf16_speedup=speedup)


@functools.cache
def detect(device: str | None = None) -> Capability:
    """The capability torch reports for ``device`` (default: cuda if visible, else mps, else cpu)."""
    import torch

    if device is None:
        mps = getattr(torch.backends, "mps", None)
        device = "cuda" if torch.cuda.is_available() else "mps" if mps is not None and mps.is_available() else "cpu"
    device = device.split(":")[0]
    if device == "cuda":
        base = _cpu_capability("cuda")
        return Capability(device="cuda", name=torch.cuda.get_device_name(), cpu_capability=base.cpu_capability,
                          cpu_amx_tile=base.cpu_amx_tile, cpu_avx512_bf16=base.cpu_avx512_bf16,
                          cuda_bf16=bool(torch.cuda.is_bf16_supported()))
    if device == "mps":
        return Capability(device="mps", name="Apple GPU")
    return _cpu_capability("cpu")


def resolve_dtype(requested: str | None, device: str | None = None, where: str = "dtype") -> PrecisionChoice:
    """:func:`choose_dtype` on this machine, warning once when the choice is emulated."""
    cap = detect(device)
    choice = choose_dtype(requested, cap, where)
    warn_if_emulated(choice, cap)
    return choice


# -- threads -----------------------------------------------------------------------------------------

def usable_cores() -> int:
    """CPUs this process may run on: affinity mask, capped by a cgroup v2 CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def choose_threads(requested: int | str | None, cores: int, load: float | None,
                   env_threads: str | None = None) -> ThreadChoice:
    """Threads for torch: an explicit number is kept; ``auto`` (or None) = cores not busy, at least 1."""
    if requested not in (None, "auto", ""):
        try:
            n = int(requested)
        except (TypeError, ValueError):
            raise ValueError(f"threads: {requested!r}; expected auto or a positive integer") from None
        if n < 1 or isinstance(requested, bool) or (isinstance(requested, float) and requested != n):
            raise ValueError(f"threads: {requested!r}; expected auto or a positive integer")
        return ThreadChoice(n, str(n), f"threads={n} as requested", cores, load)
    if env_threads and env_threads.strip().isdigit() and int(env_threads) > 0:
        n = int(env_threads)
        return ThreadChoice(n, "auto", f"auto: OMP_NUM_THREADS={n} in the environment", cores, load)
    busy = 0 if load is None else int(load + 0.5)
    n = max(1, cores - busy)
    load_txt = "unknown load" if load is None else f"{load:.2f} core(s) busy with other work"
    return ThreadChoice(n, "auto", f"auto: {cores} usable core(s), {load_txt} -> {n} free", cores, load)


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies summed over all CPUs, from /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    total = sum(fields[:8])                                       # guest time is already in user
    return total - idle, total


def busy_cores(interval: float = 0.5) -> float | None:
    """CPUs kept busy by other work right now: /proc/stat sampled over ``interval`` seconds while this
    process sleeps (the 1-minute load average lags: right after ``pip install`` it still reads ~1).
    Falls back to the load average where /proc/stat is missing."""
    import time

    a = _cpu_times()
    if a is None:
        return load_average()
    time.sleep(interval)
    b = _cpu_times()
    if b is None or b[1] <= a[1]:
        return load_average()
    n = os.cpu_count() or 1
    return round((b[0] - a[0]) / (b[1] - a[1]) * n, 2)


_thread_choice: ThreadChoice | None = None


def apply_threads(requested: int | str | None = "auto") -> ThreadChoice:
    """Set torch's CPU threads. ``auto`` is decided once per process (later phases of the same command
    would otherwise count this process's own load as another job's) and reused."""
    global _thread_choice
    import torch

    if requested in (None, "auto", "") and _thread_choice is not None and _thread_choice.requested == "auto":
        choice = _thread_choice
    else:
        env = os.environ.get("OMP_NUM_THREADS")
        auto = requested in (None, "auto", "") and not (env and env.strip().isdigit())
        choice = choose_threads(requested, usable_cores(), busy_cores() if auto else load_average(), env)
        if choice.requested == "auto":
            _thread_choice = choice
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice


# -- what a run records --------------------------------------------------------------------------------

@dataclass
class RunHardware:
    """Precision and threads of a run with the machine they were chosen for; goes into every summary."""

    precision: PrecisionChoice
    threads: ThreadChoice
    capability: Capability
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        import torch

        return {
            "dtype": self.precision.dtype, "dtype_requested": self.precision.requested,
            "dtype_reason": self.precision.reason, "dtype_native": self.precision.native,
            "threads": self.threads.threads, "threads_reason": self.threads.reason,
            "busy_cores_at_start": self.threads.load, "usable_cores": self.threads.cores,
            "device": self.capability.device, "device_name": self.capability.name,
            "capability": asdict(self.capability), "cpu": cpu_model_name(), "cpu_isa": self.capability.cpu_isa,
            "cpu_flags": cpu_flags(),
            "torch": torch.__version__, **self.extra,
        }

    def line(self) -> str:
        """The one line each command prints first."""
        return (f"precision {self.precision.dtype} ({self.precision.reason}); threads {self.threads.threads} "
                f"({self.threads.reason}); {self.capability.describe()}")


def prepare_run(dtype: str | None = "auto", threads: int | str | None = "auto", device: str | None = None,
                where: str = "dtype", announce: bool = True) -> RunHardware:
    """Decide precision and threads for a command, apply the threads and (optionally) print the line."""
    import sys

    cap = detect(device)
    hw = RunHardware(resolve_dtype(dtype, device, where), apply_threads(threads), cap)
    if announce:
        print(hw.line(), file=sys.stderr, flush=True)
    return hw


def device_memory_bytes(device: Any) -> int:
    """The memory of the device a model computes on: a GPU's own, else the machine's RAM."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def short_cpu_label(cap: Capability | None = None) -> str:
    """A file-name-safe label of the CPU and the instruction set that sets its speed, e.g. ``amd-epyc-avx2``
    (two machines may both call themselves "AMD EPYC": one with AVX512-BF16, one with AVX2 only)."""
    cap = cap or detect("cpu")
    name = (cap.name or cpu_model_name()).lower()
    name = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$|\d+-core", " ", name)
    name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40] or "cpu"
    return f"{name}-{re.sub(r'[^a-z0-9]+', '-', cap.cpu_isa.lower())}"


def current_threads() -> ThreadChoice:
    """The thread setting in force: the last ``auto`` decision, else torch's own count."""
    import torch

    n = torch.get_num_threads()
    if _thread_choice is not None and _thread_choice.threads == n:
        return _thread_choice
    return ThreadChoice(n, "unchanged", f"{n} as already set in this process (torch.get_num_threads())",
                        usable_cores(), load_average())
