"""The MuJoCo study: results vocabulary, per-job stages, grids, evaluation, metrics, selection."""
