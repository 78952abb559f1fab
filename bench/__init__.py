"""Benchmarks printing JSON: ``python -m bench`` (P&C and every method on an Ant-sized problem)."""
