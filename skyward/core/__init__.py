"""The ground layer: imports nothing else of skyward."""
