"""Letting a machine's SSH key log in as root on clouds whose images give the key to an
ordinary user: a step put before skyward's boot script, which logs in as root."""

from __future__ import annotations

SHEBANG = "#!/bin/bash\n"


def keys_of(user: str) -> str:
    """The step for images that give the key to ``user``: root gets that user's keys
    (failing quietly where the user has none)."""
    return (
        "install -d -m 700 /root/.ssh && "
        f"install -m 600 /home/{user}/.ssh/authorized_keys /root/.ssh/authorized_keys || true\n"
    )


def before(step: str, script: str) -> str:
    """The bash ``script`` with ``step`` run first."""
    return SHEBANG + step + script.removeprefix(SHEBANG)
