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

from skyward.api.operands import DispatchOperand
from skyward.core.lazy import lazy_names
from skyward.core.notices import quiet_in_notebooks

from skyward.core.version import VERSION as __version__

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
    "Ray", "RemoteTraceback", "SSH", "Session", "SkywardError", "SkywardFunction", "Spec", "StaleFenceError", "TaskCompleted",
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


# Every public name is imported on its first use, so `import skyward` costs next to
# nothing: a `sky` command imports only what it runs (the ``sky ls`` of a kept pool does
# not import Ray), and a node agent pays for a provider's libraries (asyncssh, boto3)
# only when it uses that provider. "module" holds the name itself, "module:attribute"
# another name for it, "module:" is the module.
_LAZY = {
    "accelerators": "skyward.accelerators:",
    "containers": "skyward.containers:",
    "integrations": "skyward.integrations:",
    "plugins": "skyward.plugins:",
    "storage": "skyward.storage:",
    "time": "skyward.api.time:",
    "NVIDIA": "skyward.api.accelerator_helpers",
    "AcceleratorSpec": "skyward.api.accelerator_helpers",
    "InstanceCandidate": "skyward.api.accelerator_helpers",
    "current_accelerator": "skyward.api.accelerator_helpers",
    "is_nvidia": "skyward.api.accelerator_helpers",
    "is_trainium": "skyward.api.accelerator_helpers",
    "select_instance": "skyward.api.accelerator_helpers",
    "Compute": "skyward.api.compute",
    "ComputePool": "skyward.api.compute",
    "MultiPool": "skyward.api.compute",
    "pool": "skyward.api.compute",
    "Pool": "skyward.api.pool",
    "DistributedSampler": "skyward.api.sampler",
    "ComputeSpec": "skyward.api.selection",
    "ProviderLike": "skyward.api.selection",
    "ProviderSelector": "skyward.api.selection",
    "SelectionLike": "skyward.api.selection",
    "select_available": "skyward.api.selection",
    "select_cheapest": "skyward.api.selection",
    "select_first": "skyward.api.selection",
    "Session": "skyward.api.session",
    "BrokenBarrierError": "skyward.collections:BrokenBarrierError",
    "StaleFenceError": "skyward.collections:StaleFenceError",
    "CollectionUnavailableError": "skyward.collections:CollectionUnavailableError",
    "barrier": "skyward.collections:barrier",
    "counter": "skyward.collections:counter",
    "lock": "skyward.collections:lock",
    "queue": "skyward.collections:queue",
    "dict": "skyward.collections:shared_dict",
    "set": "skyward.collections:shared_set",
    "Consistency": "skyward.collections.config",
    "DockerImage": "skyward.containers",
    "Accelerator": "skyward.core.accelerators",
    "parse_accelerator": "skyward.core.accelerators",
    "Allocation": "skyward.core.allocation",
    "sky": "skyward.core.context:ACTIVE",
    "AllProvidersFailedError": "skyward.core.errors",
    "CollectionClosedError": "skyward.core.errors",
    "NoActivePoolError": "skyward.core.errors",
    "NoAvailableProviderError": "skyward.core.errors",
    "NodeCrashedError": "skyward.core.errors",
    "NodeRemovedError": "skyward.core.errors",
    "PoolClosedError": "skyward.core.errors",
    "PreemptedError": "skyward.core.errors",
    "RemoteError": "skyward.core.errors",
    "RemoteTraceback": "skyward.core.errors",
    "SkywardError": "skyward.core.errors",
    "TaskExitError": "skyward.core.errors",
    "WakeError": "skyward.core.errors",
    "PendingFunction": "skyward.core.function",
    "PendingFunctionGroup": "skyward.core.function",
    "SkywardFunction": "skyward.core.function",
    "compute": "skyward.core.function",
    "function": "skyward.core.function",
    "gather": "skyward.core.function",
    "HealthChecker": "skyward.core.health",
    "AcceleratorInfo": "skyward.core.instance",
    "InstanceInfo": "skyward.core.instance",
    "NetworkInfo": "skyward.core.instance",
    "PeerInfo": "skyward.core.instance",
    "instance_info": "skyward.core.instance",
    "is_head": "skyward.core.instance",
    "shard": "skyward.core.instance",
    "CallbackWriter": "skyward.core.output",
    "redirect_output": "skyward.core.output",
    "silent": "skyward.core.output",
    "stderr": "skyward.core.output",
    "stdout": "skyward.core.output",
    "Image": "skyward.image.image",
    "PipIndex": "skyward.image.image",
    "AllocationStrategy": "skyward.model.spec",
    "Architecture": "skyward.model.spec",
    "ConsoleMode": "skyward.model.spec",
    "Nodes": "skyward.model.spec",
    "NodeSpec": "skyward.model.spec",
    "Options": "skyward.model.spec",
    "ProviderConfig": "skyward.model.spec",
    "Spec": "skyward.model.spec",
    "Worker": "skyward.model.spec",
    "metrics": "skyward.observe.metrics:",
    "Callback": "skyward.observe.bus",
    "compose": "skyward.observe.bus",
    "emit": "skyward.observe.bus",
    "use_callback": "skyward.observe.bus",
    "BootstrapPhase": "skyward.observe.events",
    "BroadcastStarted": "skyward.observe.events",
    "ClusterDestroyed": "skyward.observe.events",
    "ClusterProvisioned": "skyward.observe.events",
    "ClusterReady": "skyward.observe.events",
    "ClusterRequested": "skyward.observe.events",
    "ClusterResized": "skyward.observe.events",
    "CostFinal": "skyward.observe.events",
    "CostUpdate": "skyward.observe.events",
    "Error": "skyward.observe.events",
    "Event": "skyward.observe.events",
    "InstanceBootstrapped": "skyward.observe.events",
    "InstanceDestroyed": "skyward.observe.events",
    "InstancePreempted": "skyward.observe.events",
    "InstanceProvisioned": "skyward.observe.events",
    "InstanceReplaced": "skyward.observe.events",
    "Log": "skyward.observe.events",
    "Metric": "skyward.observe.events",
    "Progress": "skyward.observe.events",
    "TaskCompleted": "skyward.observe.events",
    "TaskStarted": "skyward.observe.events",
    "BootstrapCompleted": "skyward.observe.legacy",
    "BootstrapProgress": "skyward.observe.legacy",
    "BootstrapStarting": "skyward.observe.legacy",
    "InfraCreated": "skyward.observe.legacy",
    "InfraCreating": "skyward.observe.legacy",
    "InstanceLaunching": "skyward.observe.legacy",
    "InstanceStopping": "skyward.observe.legacy",
    "LogLine": "skyward.observe.legacy",
    "Metrics": "skyward.observe.legacy",
    "PoolStopping": "skyward.observe.legacy",
    "LogConfig": "skyward.observe.log_config",
    "Local": "skyward.providers.local.provider",
    "Ray": "skyward.providers.ray.provider",
    "Credential": "skyward.storage",
    "S3Volume": "skyward.storage",
    "Storage": "skyward.storage",
    "Volume": "skyward.storage",
    "PendingCompute": "skyward.core.function:PendingFunction",
    "SkywardEvent": "skyward.observe.events:Event",
    "PendingBatch": "skyward.core.function:PendingFunctionGroup",
    "DEFAULT_IMAGE": "skyward.image.image",
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


if TYPE_CHECKING:  # every name, as type checkers should see them
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
    from skyward.api.offers import CloudSkippedWarning, offers
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
    from skyward.collections import (
        BrokenBarrierError,
        CollectionUnavailableError,
        StaleFenceError,
        barrier,
        counter,
        lock,
        queue,
    )
    from skyward.collections import shared_dict as dict
    from skyward.collections import shared_set as set
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
    from skyward.core.instance import (
        AcceleratorInfo,
        InstanceInfo,
        NetworkInfo,
        PeerInfo,
        instance_info,
        is_head,
        shard,
    )
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
    from skyward.providers.aws.provider import AWS
    from skyward.providers.base import Offer
    from skyward.providers.container.provider import Container
    from skyward.providers.digitalocean.provider import DigitalOcean
    from skyward.providers.gcp.provider import GCP
    from skyward.providers.hyperstack.provider import Hyperstack
    from skyward.providers.jarvislabs.provider import JarvisLabs
    from skyward.providers.lambda_cloud.provider import Lambda, LambdaCloud
    from skyward.providers.local.provider import Local
    from skyward.providers.massedcompute.provider import MassedCompute
    from skyward.providers.novita.provider import Novita
    from skyward.providers.orphans import Orphan, gc
    from skyward.providers.ray.provider import Ray
    from skyward.providers.runpod.provider import RunPod
    from skyward.providers.scaleway.provider import Scaleway
    from skyward.providers.ssh.provider import SSH
    from skyward.providers.tensordock.provider import TensorDock
    from skyward.providers.vastai.provider import VastAI
    from skyward.providers.verda.provider import Verda
    from skyward.providers.vultr.provider import Vultr
    from skyward.storage import Credential, S3Volume, Storage, Volume

    PendingCompute = PendingFunction
    SkywardEvent = Event
    PendingBatch = PendingFunctionGroup
    DEFAULT_IMAGE = Image()


__getattr__ = lazy_names(globals(), _LAZY)
quiet_in_notebooks()


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


sys.modules[__name__].__class__ = _SkywardModule
