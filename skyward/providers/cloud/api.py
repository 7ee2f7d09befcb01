"""The typed face every machine cloud's API module gives the shared launch: what it
sells (``MachineType``), what to create (``Order``), what it has (``Machine``, ``Key``,
``Firewall``), and the calls (``MachineAPI``, and ``FirewallAPI`` for a cloud that
filters its machines' traffic). No untyped dict crosses this line. Two parts several
clouds share: ``KeysInCollection`` (the key calls over a ``KeyCollection``) and
``MadeFirewalls`` (the firewalls one client made)."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, runtime_checkable

from skyward.providers.cloud.errors import CloudError

if TYPE_CHECKING:
    from skyward.providers.cloud.http import ApiClient
    from skyward.providers.cloud.keys import KeyCollection

MachineState = Literal["starting", "running", "stopped", "ended"]
"""``stopped``: halted but still there (and billed, for its disk at least) until deleted;
``ended``: deleted or being deleted by the cloud."""


@dataclass(frozen=True, slots=True)
class MachineType:
    """One kind of machine a cloud sells: ``name`` is the cloud's id for it (a GPU type,
    a size slug, an offer id), ``price``/``spot_price`` dollars per hour (None: not sold
    that way), ``region`` where (None: the cloud picks)."""

    name: str
    vcpus: float
    memory_gb: float
    price: float | None
    spot_price: float | None = None
    region: str | None = None
    accelerator: str | None = None
    accelerator_count: int = 0
    accelerator_memory_gb: float | None = None
    architecture: str = "x86_64"
    disk_gb: float | None = None
    ref: str = ""
    """The cloud's own id(s) to order it with, when ``name`` is not that."""
    price_source: str = "live"
    """Where the prices come from: ``"live"`` (the cloud's API now) or ``"snapshot
    YYYY-MM-DD"`` (a dated snapshot shipped with skyward; ``Offer.price_source``)."""


@dataclass(frozen=True, slots=True)
class Order:
    """One machine to create. ``image`` is the container image (container clouds) or the
    OS image (VM clouds); ``key_id`` the registered key (None: the public key travels in
    the order itself); ``user_data`` a boot script where the cloud runs one; ``group``
    the pool's name for its machines together (its key's name), which a ``FirewallAPI``
    cloud tags each machine with."""

    name: str
    machine_type: MachineType
    spot: bool
    public_key: str
    key_id: str | None
    image: str
    user_data: str
    disk_gb: int | None = None
    group: str = ""


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine as the cloud reports it; ``ssh_host``/``ssh_port`` once it can be
    reached, ``private_ip`` the address its peers use (None: ``ssh_host``)."""

    id: str
    name: str
    state: MachineState
    ssh_host: str | None = None
    ssh_port: int = 22
    private_ip: str | None = None
    hourly_price: float | None = None
    spot: bool = False
    machine_type: str = ""
    created: float | None = None
    """Epoch seconds (None: the cloud does not say)."""
    ssh_user: str | None = None
    """Who to log in as where the cloud says (None: root)."""


@dataclass(frozen=True, slots=True)
class Key:
    """An SSH key registered with the cloud."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Firewall:
    """A firewall the cloud keeps; ``name`` is the group of machines it guards."""

    id: str
    name: str


class MachineAPI(Protocol):
    """One cloud's calls. Errors: ``CredentialsError``, ``CapacityError`` from ``create``
    when the cloud has no room, ``CloudError`` for the rest."""

    def machine_types(self, region: str | None) -> list[MachineType]:
        """What it sells in ``region`` (None: everywhere), with prices."""

    def add_key(self, name: str, public_key: str) -> str | None:
        """Register ``public_key``; its id, or None for a cloud whose orders carry the key."""

    def remove_key(self, key_id: str) -> None:
        """Delete a registered key (gone already is fine)."""

    def keys(self) -> list[Key]:
        """The registered keys (empty for a cloud without registered keys)."""

    def create(self, order: Order) -> str:
        """Start one machine; its id."""

    def get(self, machine_id: str) -> Machine | None:
        """The machine, or None once the cloud no longer has it."""

    def machines(self) -> list[Machine]:
        """Every machine of the account."""

    def delete(self, machine_id: str) -> None:
        """Terminate a machine (gone already is fine)."""


class KeysInCollection:
    """The key calls of a ``MachineAPI`` whose cloud keeps SSH keys in one REST collection:
    the class's ``KEYS`` says where and under which field names, ``_http`` is the client
    they go through. Errors as ``KeyCollection``'s (CloudError when a key added is not
    shown)."""

    KEYS: ClassVar[KeyCollection]
    _http: ApiClient

    def add_key(self, name: str, public_key: str) -> str | None:
        """Register ``public_key`` as ``name``; its id."""
        return self.KEYS.add(self._http, name, public_key)

    def remove_key(self, key_id: str) -> None:
        """Delete the key (gone already is fine)."""
        self.KEYS.remove(self._http, key_id)

    def keys(self) -> list[Key]:
        """Every key of the account."""
        return self.KEYS.listed(self._http)


class MadeFirewalls:
    """The firewalls one ``FirewallAPI`` client made, by group, so that a machine is only
    ever created inside its own pool's: ``of`` raises CloudError for a group none was made
    for. ``cloud``, ``kind`` ("security group") and ``machine`` ("a server") word it."""

    def __init__(self, cloud: str, kind: str, machine: str) -> None:
        self._cloud = cloud
        self._kind = kind
        self._machine = machine
        self._made: dict[str, str] = {}

    def add(self, group: str, firewall_id: str) -> str:
        """Keep ``firewall_id`` as the one made for ``group``; the id."""
        self._made[group] = firewall_id
        return firewall_id

    def forget(self, group: str) -> None:
        """``group``'s firewall is gone (none kept is fine)."""
        self._made.pop(group, None)

    def __contains__(self, firewall_id: object) -> bool:
        """Whether this client made the firewall with this id."""
        return firewall_id in self._made.values()

    def of(self, group: str) -> str:
        """The id of the firewall made for ``group``; CloudError when none was."""
        if group not in self._made:
            raise CloudError(
                f"no {self._cloud} {self._kind} was made for {group!r} by this client; "
                f"{self._machine} is never created outside its pool's {self._kind}"
            )
        return self._made[group]


@runtime_checkable
class FirewallAPI(Protocol):
    """A cloud whose machines have public addresses and whose API filters their traffic
    (DigitalOcean's Cloud Firewalls): each pool's machines sit behind a firewall of their
    own, named for the pool's ``group`` (``Order.group``). Errors as ``MachineAPI``."""

    def add_firewall(self, group: str) -> str:
        """A firewall for the machines of ``group``, in place before any of them exists:
        inbound SSH from anywhere and anything from the group's own machines, outbound
        anything; its id."""

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        """Delete the firewall of ``group`` and what it was made with (gone already is fine)."""

    def firewalls(self) -> list[Firewall]:
        """Every firewall of the account."""


def epoch(text: object) -> float | None:
    """A time as the clouds' APIs write it (ISO 8601 / RFC 3339, ``Z`` or an offset,
    fractions finer than microseconds cut; one without an offset read as UTC, not as this
    machine's local time) in epoch seconds; None when absent or not such a time
    (``Machine.created``)."""
    if not text:
        return None
    parts = _ISO_TIME.fullmatch(str(text).replace("Z", "+00:00"))
    if parts is None:
        return None
    head, fraction, zone = parts.group(1), parts.group(2) or "", parts.group(3) or ""
    try:
        stamp = f"{head}.{fraction[:6]}{zone}" if fraction else f"{head}{zone}"
        moment = datetime.datetime.fromisoformat(stamp)
        return (moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)).timestamp()
    except ValueError:
        return None


_ISO_TIME = re.compile(r"([^.]+?)(?:\.(\d+))?([+-]\d\d:?\d\d)?")
