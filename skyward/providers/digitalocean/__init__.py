"""DigitalOcean: Droplets (CPU and GPU virtual machines) through its API v2."""
