"""The method itself: the Gaussian MLP and its training, Perturb-and-Correct (fully connected,
convolutional, on any Flax model), the predictive distribution and the theory's diagnostics.

Nothing here knows a study, a config file or a workflow; it imports only :mod:`pnc.runtime`.
"""
