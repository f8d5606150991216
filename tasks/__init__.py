"""Tasks: data, prompts, answer parsing and scoring for GSM8K, Creative Writing, Blocksworld."""
