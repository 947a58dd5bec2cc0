"""The process the engine runs in: CPU features, threads, timing and what building shows on the console."""
