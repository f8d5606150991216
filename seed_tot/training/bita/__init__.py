"""BiTA training: self-distillation data from the frozen model, prompt/mask-token training."""
