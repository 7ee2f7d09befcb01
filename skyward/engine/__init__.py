"""The client's dispatch engine: one driver for every provider, over a transport."""
