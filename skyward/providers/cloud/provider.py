"""``MachineCloud``: the Provider contract for every machine cloud, written once.

A cloud provider (``sky.RunPod``, ``sky.VastAI``, ``sky.Verda``, ``sky.DigitalOcean``,
``sky.Novita``) is a frozen dataclass of its parameters that says how to reach its API
(``api()``), which image its machines run (``image()``) and what it cannot honour
(``refuse()``); this class does the rest the same way for all of them:

- ``offers``: the cloud's machine types that fit the Spec, priced, cheapest first;
- ``launch``: a fresh SSH key, on a cloud with a ``FirewallAPI`` a firewall that admits
  only SSH and the pool's own machines, then ``nodes`` machines of the first offer the
  cloud has room for (the next offer when it answers "no capacity", up to six), then the
  shared remote path (``launch_on_hosts``: bootstrap, Ray, the head relay, a watchdog per
  node that halts the machine when the client vanished); closing terminates the
  machines, confirms through the API that they are gone, and deletes the firewall and
  the key (a pool with a floor of 0 does all of this each time it wakes and sleeps:
  ``ssh.sleeping``);
- ``orphans``/``remove``: what ``sky gc`` finds (machines, keys and firewalls named for a
  pool of this machine that is no longer open here) and deletes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from typing import ClassVar

from skyward.core.validation import fail
from skyward.image.image import local_python
from skyward.model.nodes import NodeHandle, SSHEndpoint
from skyward.model.spec import Options, Spec
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster, Offer, TeardownError
from skyward.providers.cloud import machines, naming
from skyward.providers.cloud import offers as pricing
from skyward.providers.cloud.api import FirewallAPI, Machine, MachineAPI, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudError
from skyward.providers.cloud.membership import CloudMachines
from skyward.providers.orphans import Orphan
from skyward.providers.ssh.connection import KnownHosts
from skyward.providers.ssh.provider import check_remote_spec
from skyward.storage.client import Storage

DEFAULT_PROVISION_TIMEOUT = 900.0
MAX_OFFERS_TRIED = 6
SSH_USER = "root"
"""Who skyward logs in as on a machine whose cloud does not name a user (``Machine.ssh_user``)."""


class MachineCloud:
    """The shared half of a machine cloud provider (see the module docstring)."""

    __slots__ = ()
    name: ClassVar[str]
    label: ClassVar[str]
    """The cloud's name in messages ("RunPod")."""
    priced: ClassVar[bool] = True
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset({"ssh_timeout", "bootstrap_timeout", "ssh_retry_interval"})
    spot_market: ClassVar[bool] = True
    """Whether the cloud sells interruptible (spot) machines."""
    regions: ClassVar[tuple[str, ...] | None] = None
    """The regions it takes by name (None: it names them itself; any string is passed on)."""

    # ------------------------------------------------------------------ per cloud

    def api(self) -> MachineAPI:
        """The cloud's calls, with this provider's credentials."""
        raise NotImplementedError

    def image(self, spec: Spec) -> str:
        """The image each machine starts from (a container image or the cloud's OS image)."""
        raise NotImplementedError

    def refuse(self, spec: Spec) -> None:
        """Raise ValueError naming a field this cloud cannot honour (beyond the shared checks)."""

    def boot_script(self, spec: Spec, options: Options) -> str:
        """What a VM runs at boot (a cloud that runs none ignores it)."""
        from skyward.providers.aws.provider import boot_script

        return boot_script(spec, options)

    def region_of(self, spec: Spec) -> str | None:
        return spec.region or getattr(self, "region", None)

    # ------------------------------------------------------------------ contract

    def validate(self, spec: Spec, options: Options) -> None:
        """Refuse what this cloud cannot honour, naming the field, before anything is created."""
        if spec.image.python_version != local_python():
            raise fail(
                "Image", "python", spec.image.python,
                f"the client runs Python {local_python()} and cloudpickle needs the same minor version on nodes; "
                'use "auto" or run the client with that version',
            )
        if spec.region is not None and self.regions is not None and spec.region not in self.regions:
            raise fail("Spec", "region", spec.region, f"{self.label} regions are {', '.join(self.regions)}")
        if isinstance(spec.allocation, float):
            raise fail(
                "Spec", "allocation", spec.allocation,
                f"{self.label} starts every node of a pool in one market; use \"spot\", \"on-demand\", "
                "\"spot-if-available\" or \"cheapest\"",
            )
        if not self.spot_market and spec.allocation == "spot":
            raise fail("Spec", "allocation", spec.allocation, f"{self.label} sells no spot machines; use \"on-demand\"")
        if getattr(spec, "instance_type", None) is not None:
            raise fail(
                "Spec", "instance_type", spec.instance_type,
                f"pinning an instance type is only built for sky.AWS; describe the machine to {self.label} with "
                "accelerator=, vcpus= and memory_gb=",
            )
        self.refuse(spec)
        check_remote_spec(spec, options)

    def offers(self, spec: Spec) -> list[Offer]:
        """Priced machines that satisfy ``spec``, cheapest first, within ``Spec.max_hourly_cost``."""
        return [offer for offer in self._every_offer(spec)[1] if pricing.within(offer, spec)]

    def default_storage(self, spec: Spec) -> Storage | None:
        """None: give each Volume its own storage (an S3-compatible store)."""
        return None

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Create the pool's machines and bring them up; everything created is removed
        again if anything fails."""
        api = self.api()
        kinds, every = self._every_offer(spec)
        where = f"in {self.region_of(spec)}" if self.region_of(spec) else "in any region"
        chosen = pricing.allowed(self.label, every, spec, where)
        if spec.node_count.floor == 0:  # an offer fits; no machine until work waits
            from skyward.providers.ssh.sleeping import sleeping

            return sleeping(self.launch, spec, options, pool_id, None)
        resources = machines.PoolMachines(self.label, pool_id, naming.key_name(pool_id))
        held = ExitStack()  # what the pool holds; closing it releases all, the newest first
        known_hosts = KnownHosts.for_pool(pool_id, held)  # in the pool's directory, with its SSH key
        registry.register(pool_id, self.name, self.region_of(spec))
        held.callback(registry.unregister, pool_id)
        held.callback(machines.release, api, resources)
        try:
            public_key = machines.make_key(resources)
            resources.key_id = api.add_key(resources.key_name, public_key)
            if isinstance(api, FirewallAPI):
                resources.firewall_id = api.add_firewall(resources.key_name)
            timeout = float(options.provision_timeout or DEFAULT_PROVISION_TIMEOUT)
            offer, order, handles = self._start(api, spec, options, kinds, chosen, resources, public_key, timeout)
            serials = itertools.count(len(handles))

            def create_one(node: int) -> NodeHandle:
                named = replace(order, name=naming.machine_name(pool_id, next(serials)))
                [machine] = machines.create_group(api, resources, [named], timeout)
                return self._handle(machine, offer, resources)

            grow = CloudMachines(api, resources, create_one)
            held.callback(grow.close)  # waits for a machine being created: it is deleted after
        except BaseException:
            held.close()
            raise
        # Ray loads when a pool launches, not in a script that adopts a kept pool
        from skyward.providers.ssh.launch import launch_on_created

        return launch_on_created(handles, spec, options, pool_id, known_hosts, held, grow)

    # ------------------------------------------------------------------ gc

    def orphans(self) -> list[Orphan]:
        """Machines, keys and firewalls named for a pool of this machine that is no longer
        open here."""
        api = self.api()
        region = getattr(self, "region", None)
        found: list[Orphan] = []
        for machine in api.machines():
            reason = naming.orphan_reason(machine.name)
            named = naming.parse(machine.name)
            if reason is None or named is None or machine.state == "ended":
                continue
            found.append(Orphan(
                self.name, region, "instance", machine.id, named.pool, reason, machine.created,
                machine.hourly_price or 0.0,
            ))
        for key in api.keys():
            reason = naming.orphan_reason(key.name)
            named = naming.parse(key.name)
            if reason is not None and named is not None:
                found.append(Orphan(self.name, region, "ssh-key", key.id, named.pool, reason))
        for firewall in api.firewalls() if isinstance(api, FirewallAPI) else []:
            reason = naming.orphan_reason(firewall.name)
            named = naming.parse(firewall.name)
            if reason is not None and named is not None:
                found.append(Orphan(self.name, region, "firewall", firewall.id, named.pool, reason))
        return found

    def remove(self, orphans: Sequence[Orphan]) -> None:
        """Terminate the orphan machines (confirmed), then delete the keys, and the
        firewalls once no orphan machine is left."""
        api = self.api()
        left = machines.delete_machines(api, [o.id for o in orphans if o.kind == "instance"], self.label)
        kept = bool(left)
        for orphan in orphans:
            try:
                if orphan.kind == "ssh-key":
                    api.remove_key(orphan.id)
                elif orphan.kind == "firewall" and isinstance(api, FirewallAPI):
                    if kept:
                        left.append(f"firewall {orphan.id} (kept while machines may run)")
                    else:  # its name is the pool's key name (``naming.key_name``): pool and owner
                        api.remove_firewall(orphan.id, naming.key_name(orphan.pool))
            except CloudError as exc:
                left.append(f"{orphan.kind} {orphan.id} ({exc})")
        if left:
            raise TeardownError(f"could not confirm the deletion of {'; '.join(left)} on {self.label}")

    # ------------------------------------------------------------------ helpers

    def _every_offer(self, spec: Spec) -> tuple[list[MachineType], list[Offer]]:
        kinds = self.api().machine_types(self.region_of(spec))
        return kinds, pricing.offers(self.name, kinds, spec)

    def _start(
        self, api: MachineAPI, spec: Spec, options: Options, kinds: list[MachineType], chosen: list[Offer],
        resources: machines.PoolMachines, public_key: str, timeout: float,
    ) -> tuple[Offer, Order, list[NodeHandle]]:
        """The nodes the pool opens with (``Nodes.floor``), on the first offer the cloud has
        room for; that offer, the order of its machines (for the ones that join later) and
        the nodes."""
        count = spec.node_count.floor
        image, user_data = self.image(spec), self.boot_script(spec, options)
        refused: list[str] = []
        for offer in chosen[:MAX_OFFERS_TRIED]:
            kind = machines.type_of(kinds, offer.instance_type, offer.region)
            orders = [
                Order(naming.machine_name(resources.pool_id, index), kind, offer.spot, public_key, resources.key_id,
                      image, user_data, spec.disk_gb, resources.key_name)
                for index in range(count)
            ]
            try:
                started = machines.create_group(api, resources, orders, timeout)
            except CapacityError as exc:
                market = "spot" if offer.spot else "on-demand"
                refused.append(f"{offer.instance_type}{f' in {offer.region}' if offer.region else ''} ({market}): {exc}")
                continue
            return offer, orders[0], [self._handle(machine, offer, resources) for machine in started]
        raise CapacityError(
            f"{self.label} had no capacity for any of the {len(refused)} cheapest offers: " + "; ".join(refused)
            + ". Try another region, accelerator or allocation, or later"
        )

    def _handle(self, machine: Machine, offer: Offer, resources: machines.PoolMachines) -> NodeHandle:
        assert machine.ssh_host is not None and resources.key_path is not None
        endpoint = SSHEndpoint(machine.ssh_host, machine.ssh_port, machine.ssh_user or SSH_USER, str(resources.key_path))
        return NodeHandle(
            machine.id, machine.private_ip or machine.ssh_host, endpoint, instance_type=offer.instance_type,
            hourly_price=machine.hourly_price if machine.hourly_price is not None else offer.hourly_price,
            ondemand_price=offer.ondemand_price, spot=offer.spot, region=offer.region,
        )
