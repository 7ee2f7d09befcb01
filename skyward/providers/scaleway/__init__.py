"""Scaleway: Instances (CPU and GPU virtual machines) through its Instance API v1."""
