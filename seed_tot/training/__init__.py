"""Training pipelines for the decoders that need a trained model (CLLM, BiTA)."""
