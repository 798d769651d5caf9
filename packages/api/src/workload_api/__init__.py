"""Workload HTTP API."""
