"""`vista-distill check`: a recipe checked before a long run (data, models, prompts, hardware) and the GPU memory
estimate it reports."""
