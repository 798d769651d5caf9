"""The workload command line."""
