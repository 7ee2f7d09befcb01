"""A pool's volumes: credentials resolved on the client, mounts made where the nodes run.

The client resolves every volume's storage once (``resolved``), holding the credentials
for the pool's life (a minted key is revoked when the block ends), and hands each node
``NodeVolume``s: the Volume and its endpoint with plain-string keys, which travel as a
JSON line on a process's stdin (``encode``/``decode``), never on a command line. Nodes
of a remote pool get only the keys given to a volume's storage, or this machine's AWS
credential chain where the storage opts in (``check_node_credentials``).
``mount_all`` mounts them in order (undoing the ones done if one fails) and
``unmount_all`` takes them down; ``mounted`` does both around a block, for a local pool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, replace

from msgspec import Struct

from skyward.storage.client import ResolvedStorage, Storage
from skyward.storage.endpoint import is_aws_s3
from skyward.storage.errors import StorageCredentialsError, VolumeCredentialsError, VolumeMountError
from skyward.storage.mount import MOUNT_TIMEOUT_S, MountedVolume, mount_volume, unmount
from skyward.storage.volume import Volume


class NodeVolume(Struct, frozen=True):
    """One volume as a node mounts it: the Volume (its storage dropped) and the storage
    resolved to plain strings. The repr hides the keys."""

    volume: Volume
    storage: ResolvedStorage


def check_node_credentials(volumes: Sequence[Volume]) -> None:
    """Raise VolumeCredentialsError, naming ``Spec.volumes[i]``, for the first of a
    Spec's volumes whose storage has no keys and does not opt in with
    ``ship_client_credentials``: nodes elsewhere get only the credentials a volume's
    storage is given. Volumes without a storage are skipped."""
    for index, volume in enumerate(volumes):
        storage = volume.storage
        if storage is None or storage.access_key is not None or storage.ship_client_credentials:
            continue
        raise VolumeCredentialsError(
            index, volume.bucket, volume.mount, storage.endpoint,
            aws_s3=is_aws_s3(storage.endpoint),
        )


@contextmanager
def resolved(
    volumes: Sequence[Volume], *, here: bool = False
) -> Iterator[tuple[NodeVolume, ...]]:
    """Every volume with its storage's credentials resolved, held until the block ends.

    For nodes elsewhere (``here`` False), ``check_node_credentials`` runs first, before
    any storage is opened. A storage without keys gets this machine's AWS credential
    chain (environment, ~/.aws, SSO, an instance role): on a remote pool only where it
    opts in, on this machine (``here``: a local pool's mounts) always, the keys staying
    here. Each distinct storage is opened once. Every volume must name its storage (the
    pool fills in the provider's default first). Raises VolumeCredentialsError and
    StorageCredentialsError."""
    if not here:
        check_node_credentials(volumes)
    with ExitStack() as held:
        opened: dict[Storage, ResolvedStorage] = {}
        found = []
        for volume in volumes:
            storage = volume.storage
            if storage is None:
                raise ValueError(
                    f"{volume!r} has no storage: the pool fills in the provider's default first"
                )
            if storage not in opened:
                opened[storage] = _with_chain_keys(held.enter_context(storage.credentials()))
            found.append(NodeVolume(replace(volume, storage=None), opened[storage]))
        yield tuple(found)


def mount_all(
    volumes: Sequence[NodeVolume], timeout: float = MOUNT_TIMEOUT_S
) -> list[MountedVolume]:
    """Mount every volume, in order; if one fails, unmount those already mounted and
    raise its VolumeMountError (bucket, mount point, cause). Each mount is bounded by
    ``timeout``."""
    mounted: list[MountedVolume] = []
    try:
        for item in volumes:
            storage = item.storage
            mounted.append(
                mount_volume(
                    item.volume,
                    storage.endpoint,
                    storage.access_key,
                    storage.secret_key,
                    path_style=storage.path_style,
                    region=storage.region,
                    session_token=storage.session_token,
                    timeout=timeout,
                )
            )
    except BaseException:
        unmount_all(mounted, raising=False)
        raise
    return mounted


def unmount_all(mounted: Sequence[MountedVolume], *, raising: bool = True) -> None:
    """Unmount every volume, last mounted first, trying all of them; then raise the
    first VolumeMountError (one that stayed mounted) when ``raising``."""
    failures: list[VolumeMountError] = []
    for item in reversed(mounted):
        try:
            unmount(item)
        except VolumeMountError as error:
            failures.append(error)
    if failures and raising:
        raise failures[0]


@contextmanager
def mounted(volumes: Sequence[Volume]) -> Iterator[list[MountedVolume]]:
    """Resolve and mount ``volumes`` on this machine for the block; unmount them and
    release the credentials at its end, also when it fails."""
    with resolved(volumes, here=True) as items:
        done = mount_all(items)
        try:
            yield done
        finally:
            unmount_all(done)


def encode(volumes: Sequence[NodeVolume]) -> str:
    """One JSON line (no newline) carrying the volumes, keys included: for a stdin."""
    return json.dumps(
        [{"volume": asdict(item.volume), "storage": asdict(item.storage)} for item in volumes]
    )


def decode(line: str) -> tuple[NodeVolume, ...]:
    """The volumes ``encode`` wrote."""
    return tuple(
        NodeVolume(Volume(**item["volume"]), ResolvedStorage(**item["storage"]))
        for item in json.loads(line)
    )


def _with_chain_keys(storage: ResolvedStorage) -> ResolvedStorage:
    """``storage`` with this machine's AWS credential chain's keys when it has none of
    its own; StorageCredentialsError when the chain has none."""
    if storage.access_key is not None:
        return storage
    import boto3

    found = boto3.Session().get_credentials()
    if found is None:
        raise StorageCredentialsError(
            f"no credentials for {storage.endpoint}: the storage has no keys and this "
            "machine's AWS credential chain (environment, ~/.aws, an instance role) has "
            "none to give the nodes; pass access_key= and secret_key= to the storage",
            storage.endpoint,
        )
    frozen = found.get_frozen_credentials()
    return replace(
        storage,
        access_key=frozen.access_key,
        secret_key=frozen.secret_key,
        session_token=frozen.token,
    )
