"""Running tool calls: the per-call pipeline, the scheduler, the batch of a turn."""
