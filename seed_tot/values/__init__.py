"""A learned judge: a small head on the target's own hidden states that says how likely a state
(a partial or whole solution) is to reach a correct answer, trained on the target's rollouts.

states.py   where a solution's states end (pure text functions)
features.py the target's hidden state at the end of each state (one forward, stopped at the layer)
head.py     the head: standardise + logistic regression, fit by problem-grouped folds, saved to a file
judge.py    features + head bound to a loaded target: values for the search
Its training (rollouts, stored features, fitting) is seed_tot/training/value/.
"""
