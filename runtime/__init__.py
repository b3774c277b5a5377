"""What a run runs on: the hardware (CPU kind, precision, threads) and the terminal (progress, quiet libraries)."""
