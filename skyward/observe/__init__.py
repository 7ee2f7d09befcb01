"""What the client shows and records of a pool: events, the bus, consoles, metrics, logging, cost."""
