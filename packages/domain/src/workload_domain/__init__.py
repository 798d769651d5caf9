"""Workload domain."""
