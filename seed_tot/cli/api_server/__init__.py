"""`seed-tot api`: an OpenAI-compatible HTTP endpoint whose every answer is grown as a reasoning
tree; concurrent requests share one executor and its continuous batch (docs/api_server.md)."""
