"""Vast.ai: GPU machines of its marketplace (containers with SSH) through its REST API."""
