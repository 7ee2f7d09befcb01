"""Providers: turn a Spec into running nodes (local, an existing Ray cluster, SSH hosts, clouds)."""
