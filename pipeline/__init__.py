"""The VISTA method: stages, labels and rules, prompts, parsing and the engine that runs them."""
