"""The MuJoCo study's per-job stages, hyperparameter grids, evaluation, metrics and selection."""
