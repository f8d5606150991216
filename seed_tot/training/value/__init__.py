"""Training the learned judge (seed_tot/values/, which runs it): the target's rollouts on training
problems (rollouts.py, on the engine rollout_engine.py picks), their features stored per chain
(store.py), and the heads fit and cross-validated on them (fit.py). `seed-tot train value` runs them."""
