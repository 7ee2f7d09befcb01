"""Novita AI: GPU instances (containers with SSH) through its GPU instance API."""
