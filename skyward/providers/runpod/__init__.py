"""RunPod: GPU pods (containers with SSH) through its REST API, prices from its GraphQL API."""
