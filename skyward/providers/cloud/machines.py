"""Creating a pool's machines on a cloud and taking all of them down again, confirmed
through the cloud's API. Shared by every machine cloud; the cloud's own calls come in a
``MachineAPI``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skyward.core.private_dir import create_private_file
from skyward.providers import registry
from skyward.providers.base import TeardownError
from skyward.providers.cloud.api import FirewallAPI, Machine, MachineAPI, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudError

POLL = 1.0
TERMINATE_TIMEOUT = 300.0


@dataclass
class PoolMachines:
    """What one pool holds on a cloud, as created so far. ``key_name`` is also the pool's
    group name (``Order.group``, its firewall's name)."""

    cloud: str
    pool_id: str
    key_name: str
    key_path: Path | None = None
    key_id: str | None = None
    firewall_id: str | None = None
    machines: list[str] = field(default_factory=list)


def make_key(resources: PoolMachines) -> str:
    """A fresh ed25519 key for the pool: the private half in the pool's directory
    (``registry.files_of``, mode 0600), the public half (OpenSSH text) returned."""
    from skyward.providers.ssh.asyncssh_import import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    path = registry.files_of(resources.pool_id) / f"{resources.key_name}.pem"
    create_private_file(str(path), key.export_private_key())
    resources.key_path = path
    return key.export_public_key().decode().strip()


def create_group(
    api: MachineAPI, resources: PoolMachines, orders: Sequence[Order], timeout: float,
) -> list[Machine]:
    """Every order running and reachable over SSH, in order. CapacityError (after
    deleting what was created) when the cloud refuses one or takes one back while it
    starts; CloudError when they are not up within ``timeout`` seconds."""
    started: list[str] = []
    try:
        for order in orders:
            machine_id = api.create(order)
            started.append(machine_id)
            resources.machines.append(machine_id)
        return _wait_running(api, started, timeout, resources.cloud)
    except BaseException:
        _delete_confirmed(api, started, resources.cloud)
        resources.machines[:] = [m for m in resources.machines if m not in started]
        raise


def release(api: MachineAPI, resources: PoolMachines) -> None:
    """Terminate the pool's machines, wait until the cloud no longer has them, delete its
    firewall (once no machine it guarded is left) and its key; TeardownError naming what
    could not be confirmed gone."""
    left = _delete_confirmed(api, resources.machines, resources.cloud)
    if resources.firewall_id is not None and isinstance(api, FirewallAPI):
        if left:
            left.append(f"firewall {resources.key_name} (kept while its machines may run)")
        else:
            try:
                api.remove_firewall(resources.firewall_id, resources.key_name)
            except CloudError as exc:
                left.append(f"firewall {resources.key_name} ({exc})")
    if resources.key_id is not None:
        try:
            api.remove_key(resources.key_id)
        except CloudError as exc:
            left.append(f"SSH key {resources.key_name} ({exc})")
    gc = f"sky gc --provider {resources.cloud.lower()}"
    confirm_released(left, resources.key_path, f"on {resources.cloud}", resources.pool_id, gc)


def confirm_released(left: Sequence[str], key_path: Path | None, where: str, pool_id: str, gc: str) -> None:
    """The end of a pool's release: its private key file deleted (``key_path``; None: it
    has none), then TeardownError when ``left`` describes anything not confirmed gone,
    naming it, ``where`` it is ("on Vultr", "in us-east-1") and the ``gc`` command that
    finds and removes it; nothing when ``left`` is empty."""
    if key_path is not None:
        key_path.unlink(missing_ok=True)
    if left:
        raise TeardownError(
            f"could not confirm the deletion of {'; '.join(left)} {where} for pool {pool_id}; "
            f"`{gc}` finds and removes them"
        )


def delete_machines(api: MachineAPI, ids: Sequence[str], cloud: str) -> list[str]:
    """Terminate ``ids`` and confirm it; what is left, described (empty: all gone)."""
    return _delete_confirmed(api, ids, cloud)


def _wait_running(api: MachineAPI, ids: list[str], timeout: float, cloud: str) -> list[Machine]:
    deadline = time.monotonic() + timeout
    while True:
        found = {machine_id: api.get(machine_id) for machine_id in ids}
        ended = [machine_id for machine_id, m in found.items() if m is None or m.state in ("stopped", "ended")]
        if ended:
            raise CapacityError(f"{cloud} machine {ended[0]} ended while starting (the cloud took it back)")
        ready = [m for m in found.values() if m is not None and m.state == "running" and m.ssh_host]
        if len(ready) == len(ids):
            return ready
        if time.monotonic() > deadline:
            raise CloudError(
                f"{len(ids) - len(ready)} of {len(ids)} {cloud} machines were not running within {timeout:g}s; "
                "raise Options.provision_timeout"
            )
        time.sleep(POLL)


def _delete_confirmed(api: MachineAPI, ids: Sequence[str], cloud: str) -> list[str]:
    left: list[str] = []
    asked: list[str] = []
    for machine_id in ids:
        try:
            api.delete(machine_id)
            asked.append(machine_id)
        except CloudError as exc:
            left.append(f"machine {machine_id} ({exc})")
    deadline = time.monotonic() + TERMINATE_TIMEOUT
    waiting = list(asked)
    while waiting:
        waiting = [m for m in waiting if not _gone(api.get, m)]
        if not waiting:
            break
        if time.monotonic() > deadline:
            left.extend(f"machine {m} (still there after {TERMINATE_TIMEOUT:g}s)" for m in waiting)
            break
        time.sleep(POLL)
    return left


def _gone(get: Callable[[str], Machine | None], machine_id: str) -> bool:
    try:
        machine = get(machine_id)
    except CloudError:
        return False
    return machine is None or machine.state == "ended"


def type_of(kinds: Sequence[MachineType], name: str, region: str | None) -> MachineType:
    """The machine type an offer came from."""
    return next(k for k in kinds if k.name == name and k.region == region)
