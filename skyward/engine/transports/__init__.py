"""How bytes reach a node agent: Ray actor calls, the local lane, the SSH relay."""
