"""Training pipelines: the decoders that need a trained model (CLLM, BiTA) and the learned judge (value/)."""
