"""Vultr: Cloud Compute and Cloud GPU virtual machines through its API v2."""
