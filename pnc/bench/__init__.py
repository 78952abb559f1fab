"""Benchmarks printing JSON: ``python -m pnc.bench`` (P&C and every method on an Ant-sized problem)."""
