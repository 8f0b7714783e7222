"""Batch schedulers (Slurm, and any queue with submit, query and cancel commands) on one base."""
