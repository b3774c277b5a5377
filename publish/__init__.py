"""What leaves the machine: serving files for vLLM / SGLang / llama.cpp (serve-config) and adapters pushed
with their model cards (Hub or a local folder)."""
