"""The image classifier that the OOD methods and the CIFAR-10 study share: the network
(:mod:`.model`), its training recipe (:mod:`.recipe`), its training runs on disk
(:mod:`.trained`) and the single-model OOD scores (:mod:`.baselines`).
"""
