"""Skyward: run ordinary Python functions on a pool of machines.

    import skyward as sky

    @sky.function
    def double(x):
        return 2 * x

    with sky.Compute(nodes=4) as pool:
        double(21) >> pool        # one node
        double(21) @ pool         # every node
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

from skyward import accelerators, containers, integrations, plugins, storage
from skyward.api import time
from skyward.api.accelerator_helpers import (
    NVIDIA,
    AcceleratorSpec,
    InstanceCandidate,
    current_accelerator,
    is_nvidia,
    is_trainium,
    select_instance,
)
from skyward.api.compute import Compute, ComputePool, MultiPool, pool
from skyward.api.operands import DispatchOperand
from skyward.api.pool import Pool
from skyward.api.sampler import DistributedSampler
from skyward.api.selection import (
    ComputeSpec,
    ProviderLike,
    ProviderSelector,
    SelectionLike,
    select_available,
    select_cheapest,
    select_first,
)
from skyward.api.session import Session
from skyward.collections import BrokenBarrierError, CollectionUnavailableError, barrier, counter, lock, queue
from skyward.collections import shared_dict as dict  # noqa: A004 - sky.dict is the API
from skyward.collections import shared_set as set  # noqa: A004 - sky.set is the API
from skyward.collections.config import Consistency
from skyward.containers import DockerImage
from skyward.core.accelerators import Accelerator, parse_accelerator
from skyward.core.allocation import Allocation
from skyward.core.context import ACTIVE as sky
from skyward.core.errors import (
    AllProvidersFailedError,
    CollectionClosedError,
    NoActivePoolError,
    NoAvailableProviderError,
    NodeCrashedError,
    NodeRemovedError,
    PoolClosedError,
    PreemptedError,
    RemoteError,
    RemoteTraceback,
    SkywardError,
    TaskExitError,
    WakeError,
)
from skyward.core.function import PendingFunction, PendingFunctionGroup, SkywardFunction, compute, function, gather
from skyward.core.health import HealthChecker
from skyward.core.instance import AcceleratorInfo, InstanceInfo, NetworkInfo, PeerInfo, instance_info, is_head, shard
from skyward.core.lazy import lazy_names
from skyward.core.output import CallbackWriter, redirect_output, silent, stderr, stdout
from skyward.image.image import Image, PipIndex
from skyward.model.spec import (
    AllocationStrategy,
    Architecture,
    ConsoleMode,
    Nodes,
    NodeSpec,
    Options,
    ProviderConfig,
    Spec,
    Worker,
)
from skyward.observe import metrics
from skyward.observe.bus import Callback, compose, emit, use_callback
from skyward.observe.events import (
    BootstrapPhase,
    BroadcastStarted,
    ClusterDestroyed,
    ClusterProvisioned,
    ClusterReady,
    ClusterRequested,
    ClusterResized,
    CostFinal,
    CostUpdate,
    Error,
    Event,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstancePreempted,
    InstanceProvisioned,
    InstanceReplaced,
    Log,
    Metric,
    Progress,
    TaskCompleted,
    TaskStarted,
)
from skyward.observe.legacy import (
    BootstrapCompleted,
    BootstrapProgress,
    BootstrapStarting,
    InfraCreated,
    InfraCreating,
    InstanceLaunching,
    InstanceStopping,
    LogLine,
    Metrics,
    PoolStopping,
)
from skyward.observe.log_config import LogConfig
from skyward.providers.local.provider import Local
from skyward.providers.ray.provider import Ray
from skyward.storage import Credential, S3Volume, Storage, Volume

PendingCompute = PendingFunction
SkywardEvent = Event
PendingBatch = PendingFunctionGroup
DEFAULT_IMAGE = Image()

__version__ = "0.1.0"

__all__ = [
    "sky", "ComputeSpec", "ProviderLike", "ProviderSelector", "SelectionLike",
    "Accelerator", "AcceleratorInfo", "AcceleratorSpec", "InstanceCandidate", "NVIDIA",
    "current_accelerator", "is_nvidia", "is_trainium", "parse_accelerator", "select_instance", "AllProvidersFailedError", "AWS", "NoAvailableProviderError", "Offer", "Orphan", "offers", "CloudSkippedWarning", "gc",
    "select_first", "select_cheapest", "select_available", "Allocation", "BootstrapPhase", "BrokenBarrierError", "CollectionClosedError", "CollectionUnavailableError", "CallbackWriter", "ClusterDestroyed", "ClusterProvisioned", "ClusterReady",
    "ClusterRequested", "Compute", "ComputePool", "CostFinal", "CostUpdate", "DEFAULT_IMAGE",
    "Error", "Event", "Image", "InstanceBootstrapped", "InstanceDestroyed", "InstanceInfo",
    "InstancePreempted", "InstanceProvisioned", "InstanceReplaced", "Local", "Log", "LogConfig",
    "Metric", "MultiPool", "NetworkInfo", "NoActivePoolError", "NodeCrashedError", "Nodes",
    "Options", "PeerInfo", "PendingBatch", "PendingCompute", "PendingFunction",
    "PendingFunctionGroup", "PipIndex", "Pool", "PoolClosedError", "Progress", "RemoteError",
    "Ray", "RemoteTraceback", "SSH", "Session", "SkywardError", "SkywardFunction", "Spec", "TaskCompleted",
    "TaskExitError", "TaskStarted", "Worker", "accelerators", "compose", "compute", "emit", "function", "gather",
    "instance_info", "is_head", "metrics", "pool", "redirect_output", "shard", "silent", "stderr", "stdout",
    "time", "use_callback", "dict", "set", "counter", "queue", "barrier", "lock",
    "S3Volume", "Storage", "Volume", "storage",
    "BroadcastStarted", "ClusterResized", "HealthChecker", "NodeRemovedError", "PreemptedError", "WakeError",
    "RunPod", "VastAI", "Verda", "DigitalOcean", "Novita", "Container", "Hyperstack", "TensorDock", "containers",
    "DockerImage", "Vultr", "Lambda", "LambdaCloud", "Scaleway", "JarvisLabs", "MassedCompute", "GCP",
    "Callback", "SkywardEvent", "InfraCreating", "InfraCreated", "InstanceLaunching", "BootstrapStarting",
    "BootstrapProgress", "BootstrapCompleted", "Metrics", "LogLine", "InstanceStopping", "PoolStopping",
    "plugins", "integrations", "DistributedSampler",
    "AllocationStrategy", "Architecture", "Consistency", "ConsoleMode", "Credential", "NodeSpec", "ProviderConfig",
]


class _SkywardModule(DispatchOperand, types.ModuleType):
    """Lets ``x >> sky`` with a non-pending ``x`` fail with a message that says the fix."""

    def _wrong_left(self, value: object, operator: str) -> TypeError:
        return TypeError(
            f"the left side of `{operator} sky` must be a pending call such as f(x) where f is "
            f"decorated with @sky.function; got {type(value).__name__} {value!r}"
        )

    def __reduce__(self) -> tuple[Callable[[str], types.ModuleType], tuple[str]]:
        return (importlib.import_module, (self.__name__,))


# Imported on first use: asyncssh and cryptography cost ~0.15 s (boto3 more), which every
# node agent (it imports this package) would otherwise pay at pool start.
_LAZY = {
    "SSH": "skyward.providers.ssh.provider",
    "AWS": "skyward.providers.aws.provider",
    "RunPod": "skyward.providers.runpod.provider",
    "VastAI": "skyward.providers.vastai.provider",
    "Verda": "skyward.providers.verda.provider",
    "DigitalOcean": "skyward.providers.digitalocean.provider",
    "Novita": "skyward.providers.novita.provider",
    "Hyperstack": "skyward.providers.hyperstack.provider",
    "TensorDock": "skyward.providers.tensordock.provider",
    "Vultr": "skyward.providers.vultr.provider",
    "Lambda": "skyward.providers.lambda_cloud.provider",
    "LambdaCloud": "skyward.providers.lambda_cloud.provider",
    "Scaleway": "skyward.providers.scaleway.provider",
    "JarvisLabs": "skyward.providers.jarvislabs.provider",
    "MassedCompute": "skyward.providers.massedcompute.provider",
    "GCP": "skyward.providers.gcp.provider",
    "Container": "skyward.providers.container.provider",
    "offers": "skyward.api.offers",
    "CloudSkippedWarning": "skyward.api.offers",
    "gc": "skyward.providers.orphans",
    "Offer": "skyward.providers.base",
    "Orphan": "skyward.providers.orphans",
}


if TYPE_CHECKING:  # the lazy names, as type checkers should see them
    from skyward.api.offers import CloudSkippedWarning, offers
    from skyward.providers.aws.provider import AWS
    from skyward.providers.base import Offer
    from skyward.providers.container.provider import Container
    from skyward.providers.digitalocean.provider import DigitalOcean
    from skyward.providers.gcp.provider import GCP
    from skyward.providers.hyperstack.provider import Hyperstack
    from skyward.providers.jarvislabs.provider import JarvisLabs
    from skyward.providers.lambda_cloud.provider import Lambda, LambdaCloud
    from skyward.providers.massedcompute.provider import MassedCompute
    from skyward.providers.novita.provider import Novita
    from skyward.providers.orphans import Orphan, gc
    from skyward.providers.runpod.provider import RunPod
    from skyward.providers.scaleway.provider import Scaleway
    from skyward.providers.ssh.provider import SSH
    from skyward.providers.tensordock.provider import TensorDock
    from skyward.providers.vastai.provider import VastAI
    from skyward.providers.verda.provider import Verda
    from skyward.providers.vultr.provider import Vultr


__getattr__ = lazy_names(globals(), _LAZY)


sys.modules[__name__].__class__ = _SkywardModule
