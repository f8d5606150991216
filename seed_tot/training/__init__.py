"""Training pipelines for the decoders that learn their accelerator (BiTA, CLLM)."""
