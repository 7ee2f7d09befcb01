"""Hyperstack (NexGen Cloud): GPU virtual machines through its Infrahub API."""
