"""Massed Compute: GPU virtual machines through its VM API v1."""
