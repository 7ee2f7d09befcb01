"""What runs on a node: the agent, its executors, its outbox of events."""
