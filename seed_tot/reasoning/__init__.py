"""Thought Generator, State Evaluator, prompt formatting and per-request seeds."""
