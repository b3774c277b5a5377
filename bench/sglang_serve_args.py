"""Does SGLang accept the ``sglang.sh`` that ``vista-distill serve-config`` writes? The script is run by bash as a
user would, with ``python`` on PATH replaced by a shim that hands its arguments to SGLang's own parser
(``ServerArgs.add_cli_args``, then ``ServerArgs.from_cli_args``) instead of starting a server.

    python bench/sglang_serve_args.py --sglang-python ENV/bin/python --adapters DIR [--config recipes/demo-cpu.yaml]

``ENV`` holds SGLang (``pip install --no-deps sglang`` plus what its server_args module imports: orjson,
pybase64, triton, msgspec, pyzmq, IPython; torch and transformers as here). Writes
``bench/results/sglang_serve_args.json``: SGLang's version, what its parser read, whether ``from_cli_args``
accepted it, and whether SGLang's kernels import on this machine (a server needs them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))

CHECK = r'''
import argparse, importlib.metadata as md, json, sys
argv = sys.argv[1:]
out = {"module": argv[1] if len(argv) > 1 else None, "sglang": md.version("sglang")}
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
ns = parser.parse_args(argv[2:])
out["parsed"] = {k: getattr(ns, k) for k in ("model_path", "served_model_name", "host", "port", "enable_lora",
                                             "max_loras_per_batch", "max_lora_rank", "lora_target_modules", "lora_paths")}
try:
    ServerArgs.from_cli_args(ns)
    out["from_cli_args"] = "accepted"
except Exception as e:
    out["from_cli_args"] = f"{type(e).__name__}: {e}"[:500]
try:
    import sgl_kernel  # noqa: F401
    out["sgl_kernel"] = "imports"
except Exception as e:
    out["sgl_kernel"] = f"{type(e).__name__}: {e}"[:300]
print("SGLANG-CHECK " + json.dumps(out, default=str))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sglang-python", required=True)
    ap.add_argument("--adapters", required=True)
    ap.add_argument("--config", default=str(ROOT / "recipes" / "demo-cpu.yaml"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()

    from vista_distill.config import load_recipe
    from vista_distill.publish.serve_config import write_serve_config
    from vista_distill.runtime.hardware import detect

    work = Path(tempfile.mkdtemp(prefix="sglang-args-"))
    written = write_serve_config(load_recipe(a.config), a.adapters, work / "serve", engines=("sglang",))
    (work / "check.py").write_text(CHECK)
    shim = work / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/bash\nexec {a.sglang_python} {work / 'check.py'} \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    script = Path(written["out"]) / "sglang.sh"
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in res.stdout.splitlines() if x.startswith("SGLANG-CHECK ")), None)
    out = {"cpu": detect("cpu").describe(), "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "python bench/sglang_serve_args.py " + " ".join(sys.argv[1:]),
           "script": script.read_text(), "exit": res.returncode,
           **(json.loads(line.removeprefix("SGLANG-CHECK ")) if line else {"stderr": res.stderr[-2000:]})}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "sglang_serve_args.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
