"""``sky.Container()``: each node in a container of the local Docker or Podman engine."""
