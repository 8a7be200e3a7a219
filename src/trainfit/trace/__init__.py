"""Optional extra (torch, transformers, peft): measure what the planner estimates.

Nothing here is imported by the planning path.
"""
