"""Silver data from a teacher: the VISTA prompts run by a large model, cached and resumable."""
