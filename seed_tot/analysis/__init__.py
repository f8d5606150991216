"""What the measurement scripts (scripts/) share and nothing else uses: their report files, the
tables and simulations behind docs/ and results/, the judge studies' cross-validation, the chain
pools they extend, the synthetic corpus of the CLLM study. The product (every other package of
seed_tot, tasks/, prompts/) never imports it (tests/test_layers.py checks)."""
