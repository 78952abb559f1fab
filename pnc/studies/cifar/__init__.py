"""The CIFAR OOD study (paper Section 5.4, Table 2; Appendix D; CIFAR-100 as ID too), as library
modules.

Read in order: :mod:`~pnc.studies.cifar.data` (CIFAR-10 / CIFAR-100 binary files, OpenOOD v1.5 image
lists, the tiny generated benchmark), :mod:`~pnc.studies.cifar.fetch` (downloads from the official
sources, checksums verified), :mod:`~pnc.core.classifier.model` (the classifier and its features),
:mod:`~pnc.core.classifier.recipe` (the training recipe with per-epoch checkpoints and SWAG moments),
:mod:`~pnc.core.classifier.trained` (the trained network's files checked against their SHA-256),
:mod:`~pnc.methods.ood.posthoc` (the method contract: a method's config section, its sweep on
validation, its selection and its scores; temperature, P&C's coordinate descent),
:mod:`~pnc.methods.ood` (the methods, one class and module each with its maths, their training runs and their registry; the contract's
checks, :mod:`~pnc.methods.checks`), :mod:`~pnc.studies.cifar.sweep` (each method's
configurations, expanded once by the workflow and read by id), :mod:`~pnc.studies.cifar.ood_metrics`
(AUROC, FPR@95%TPR, AUPR-In/Out with ID positive; NLL, ECE, Brier), :mod:`~pnc.studies.cifar.ood_tables`
(Table 2, the calibration and AUPR tables, the sweep table) and :mod:`~pnc.studies.cifar.jobs` (one
function per workflow job; the workflow's stages that run them: :mod:`pnc.workflow.cifar_stages`).
"""
