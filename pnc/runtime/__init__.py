"""Plumbing shared by every layer: artifact I/O, the JAX compilation cache, the allocator
policy, config-schema checks and the job stages' threads, CPU locks and process records.

It imports nothing else of ``pnc``.
"""
