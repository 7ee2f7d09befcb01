"""Lambda Cloud (Lambda Labs): GPU instances through its public Cloud API."""
