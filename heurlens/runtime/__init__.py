"""Runtime services the research code stands on: the cache and atomic writes, run folders and their locks, devices
and precision, the call context, checkpoints, model identity, downloads, argument and settings checks, Ray workers."""
