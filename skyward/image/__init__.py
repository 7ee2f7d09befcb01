"""Image building: what a node's environment is (``Image``) and the script that makes it."""
