"""The nodes a provider hands out: ``NodeHandle`` (what it knows of a machine) and how
the client logs in to one (``SSHEndpoint``)."""

from __future__ import annotations

from msgspec import Struct


class SSHEndpoint(Struct, frozen=True):
    """How the client logs in to a node: ``user@host:port`` with ``key_path`` (None: the
    user's default keys and ssh-agent)."""

    host: str
    port: int = 22
    user: str = "root"
    key_path: str | None = None

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


class NodeHandle(Struct, frozen=True):
    """One machine (or process) a provider gave the pool."""

    id: str
    address: str
    """The address peers reach it at (its private address)."""
    ssh: SSHEndpoint | None = None
    instance_type: str = ""
    hourly_price: float = 0.0
    ondemand_price: float | None = None
    """What the same machine costs on demand (None: ``hourly_price``)."""
    spot: bool = False
    region: str | None = None
