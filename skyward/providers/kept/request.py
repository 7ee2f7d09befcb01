"""What a client sends the pool daemon to open a kept pool for it (``kept.client`` on
the client, ``daemon.kept_pools`` in the daemon): the pool's definition and the client's own
context, which the pool's local agents take as theirs."""

from __future__ import annotations

import os
import sys

from msgspec import Struct

from skyward.model.spec import Options, Spec


class ClientContext(Struct, frozen=True):
    """What a local pool's agents take from the client: its working directory, import
    path and environment (the pool daemon starts agents for a client other than itself)."""

    cwd: str
    sys_path: tuple[str, ...]
    environ: dict[str, str]

    @staticmethod
    def here() -> ClientContext:
        """This process's."""
        return ClientContext(os.getcwd(), tuple(sys.path), dict(os.environ))


class KeptRequest(Struct, frozen=True):
    """A kept pool to open: its Spec and Options, the id its nodes carry, and the client."""

    spec: Spec
    options: Options
    pool_id: str
    context: ClientContext
