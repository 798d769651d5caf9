"""Workload engine."""
