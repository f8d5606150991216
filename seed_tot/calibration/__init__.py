"""Which path runs a target fastest on this machine, measured rather than read from CPU flags.

`seed-tot calibrate` (or the first `--method auto` run of a target on a machine) times each
candidate path at the run's width: the in-process batched-lookup executor in every dtype this CPU
can compute in (and with int8 layers where the user allows a lossy path), and llama.cpp's server
for a GGUF target. The fastest path's record is cached per machine and target and followed by
every later `--method auto` run (seed_tot/cli/run_config.py).
"""
