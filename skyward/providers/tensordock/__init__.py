"""TensorDock: GPU virtual machines on its marketplace of hosts, through its v2 API."""
