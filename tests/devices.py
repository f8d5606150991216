"""The device the device-aware tests put their tiny models on: SEED_TOT_TEST_DEVICE (default cpu).

scripts/gpu_check.sh sets it to cuda; CI runs on cpu."""

import os

TEST_DEVICE = os.environ.get("SEED_TOT_TEST_DEVICE", "cpu")
