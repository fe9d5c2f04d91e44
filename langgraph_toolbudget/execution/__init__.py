"""Running tool calls: the per-call pipeline, the scheduler, the batch of a turn.

Its one reason to change: what the execution layer holds (each module below says its own).
"""
