"""Bringing remote hosts up: SSH transport, Image -> install script, shipped wheels."""
