"""Google Cloud: Compute Engine virtual machines through its REST API v1."""
