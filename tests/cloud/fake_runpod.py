"""A local RunPod: the REST API's pods (``POST/GET /v1/pods``, ``GET/DELETE
/v1/pods/{podId}``) and the GraphQL API (``POST /graphql``), in the shapes RunPod
documents. A REST request with a query parameter or a body field these operations do not
declare is refused (400, naming it), and so is a ``cloudType`` other than SECURE or
COMMUNITY. A GraphQL query is parsed and validated against
``SCHEMA``, RunPod's schema as pinned under ``tests/cloud/descriptions/runpod`` (GPU
types and their lowest prices; the account's pods, one pod, deploying on demand or
interruptible, terminating), and answered as a GraphQL server answers: an invalid query
(a syntax error, a field, argument or input field RunPod does not have) with 400 and
``{"errors": [{"message"}]}``, a valid one with the data it asks for, operation by
operation. A pod refused for capacity gets RunPod's "no longer any instances available"
error."""

from __future__ import annotations

import datetime
from typing import Any

from cloud.described import DESCRIPTIONS
from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape
from graphql import GraphQLError, GraphQLResolveInfo, build_schema, graphql_sync

GPU_TYPES: list[dict[str, Any]] = [
    {"id": "NVIDIA L4", "displayName": "L4", "memoryInGb": 24, "secureCloud": True, "communityCloud": True,
     "securePrice": 0.43, "communityPrice": 0.39, "secureSpotPrice": 0.22, "communitySpotPrice": 0.2,
     "maxGpuCount": 8, "lowestPrice": {"minVcpu": 4, "minMemory": 16}},
    {"id": "NVIDIA A100 80GB PCIe", "displayName": "A100 PCIe", "memoryInGb": 80, "secureCloud": True,
     "communityCloud": True, "securePrice": 1.64, "communityPrice": 1.19, "secureSpotPrice": 0.82,
     "communitySpotPrice": 0.6, "maxGpuCount": 8, "lowestPrice": {"minVcpu": 8, "minMemory": 117}},
]
"""Each GPU type as ``gpuTypes`` shows it; ``lowestPrice`` holds one GPU's minimums."""
BY_ID = {gpu["id"]: gpu for gpu in GPU_TYPES}
NO_CAPACITY = ("There are no longer any instances available with the requested specifications. "
               "Please refresh and try again.")
SCHEMA = build_schema((DESCRIPTIONS / "runpod" / "graphql.graphql").read_text())
"""RunPod's GraphQL schema as pinned (``tests/cloud/descriptions/runpod``, derived from
RunPod's docs and official clients): the fake serves exactly what it describes."""
OPERATIONS = (
    Operation("POST", "/graphql", body=shape("query", "variables", "operationName")),
    Operation("GET", "/pods"),
    Operation("POST", "/pods", body=shape(
        "allowedCudaVersions", "cloudType", "computeType", "containerDiskInGb", "containerRegistryAuthId",
        "countryCodes", "cpuFlavorIds", "cpuFlavorPriority", "dataCenterIds", "dataCenterPriority", "dockerEntrypoint",
        "dockerStartCmd", "env", "globalNetworking", "gpuCount", "gpuTypeIds", "gpuTypePriority", "imageName",
        "interruptible", "locked", "minDiskBandwidthMBps", "minDownloadMbps", "minRAMPerGPU", "minUploadMbps",
        "minVCPUPerGPU", "name", "networkVolumeId", "ports", "supportPublicIp", "templateId", "vcpuCount",
        "volumeInGb", "volumeMountPath",
    )),
    Operation("GET", "/pods/{podId}"),
    Operation("DELETE", "/pods/{podId}"),
)
"""The operations of RunPod's REST API v1 (and its GraphQL endpoint) the fake serves."""


class FakeRunPod(FakeCloud):
    name = "runpod"
    prefix = "/v1"
    credentials = {"RUNPOD_API_KEY": TOKEN}
    operations = OPERATIONS
    pinned = "runpod"

    def success(self, method: str, path: str) -> int:
        return 201 if (method, path) == ("POST", "/pods") else 200

    def env(self) -> dict[str, str]:
        return {**super().env(), "SKYWARD_RUNPOD_GRAPHQL_API_URL": self.url.removesuffix(self.prefix)}

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"error": text, "status": status})

    def no_capacity(self, kind: str) -> Answer:
        return self.error(400, NO_CAPACITY)

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/graphql"):
            return self._graphql(body or {})
        if (method, path) == ("POST", "/pods"):
            return self._pod(self._create(body))
        if (method, path) == ("GET", "/pods"):
            return [self._pod(m) for m in self.live()]
        if path.startswith("/pods/"):
            machine = self.machines.get(path.removeprefix("/pods/"))
            if (machine is None or machine.state == "deleted") and method == "DELETE":
                raise Answer(400, {"error": "Invalid Pod ID.", "status": 400})  # as the document says
            if machine is None or machine.state == "deleted":
                raise Answer(404, {"error": "pod not found", "status": 404})
            if method == "DELETE":
                self.delete(machine.id)
                return None
            return self._pod(machine)
        raise self.no_route(method, path)

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        for field in ("name", "imageName", "gpuTypeIds", "gpuCount", "ports", "env"):
            if field not in body:
                raise self.error(400, f"missing {field}")
        if "22/tcp" not in body["ports"]:
            raise self.error(400, "invalid ports")
        if body.get("cloudType", "SECURE") not in ("SECURE", "COMMUNITY"):
            raise self.error(400, f"cloudType must be SECURE or COMMUNITY, not {body['cloudType']!r}")
        return self._deploy(body["name"], body["gpuTypeIds"][0], body["gpuCount"], body["imageName"],
                            body["env"].get("PUBLIC_KEY", ""), bool(body.get("interruptible")),
                            cloud=body.get("cloudType", "SECURE").lower())

    def _deploy(self, name: str, gpu_id: str, count: int, image: str, public_key: str, spot: bool,
                bid: float | None = None, cloud: str = "secure") -> FakeMachine:
        """A new pod of ``count`` GPUs of ``gpu_id`` (Answer 400 for a GPU type RunPod does
        not have), at ``cloud``'s price or, interruptible, at ``bid`` per GPU (the cloud's
        spot price unless given)."""
        gpu = BY_ID.get(gpu_id)
        if gpu is None:
            raise self.error(400, f"invalid gpuTypeIds {gpu_id!r}")
        price = (bid if bid is not None else gpu[f"{cloud}SpotPrice"] if spot else gpu[f"{cloud}Price"]) * count
        return self.add(name, gpu["id"], spot, image, public_key, price, gpus=count)

    def _pod(self, machine: FakeMachine) -> dict[str, Any]:
        """A pod as the REST API's ``Pod`` shows it: its GPUs under ``gpu``, no creation
        time (``lastStartedAt`` is the nearest), ``publicIp`` and ``portMappings`` null until
        it runs."""
        up = machine.state == "running"
        gpu = BY_ID.get(machine.kind, {})
        started = datetime.datetime.fromtimestamp(machine.created, datetime.UTC).isoformat().replace("+00:00", "Z")
        return {
            "id": machine.id, "name": machine.name, "image": machine.image, "desiredStatus": _status(machine),
            "publicIp": machine.address if up else None, "portMappings": {"22": 22} if up else None,
            "costPerHr": machine.price, "adjustedCostPerHr": machine.price, "interruptible": machine.spot,
            "gpu": {"id": machine.kind, "count": machine.extra.get("gpus", 1), "displayName": gpu.get("displayName", "")},
            "machineId": f"m-{machine.id}", "lastStartedAt": started,
        }

    # ------------------------------------------------------------------ GraphQL

    def _graphql(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to a GraphQL request: Answer 400 with its errors for a query that does
        not parse or is not valid against ``SCHEMA``, else its data (and the errors of the
        fields that failed)."""
        root = {
            "gpuTypes": self._gpu_types, "myself": self._myself, "pod": self._one_pod,
            "podFindAndDeployOnDemand": self._deploy_on_demand, "podRentInterruptable": self._rent_interruptable,
            "podTerminate": self._terminate,
        }
        result = graphql_sync(SCHEMA, str(body.get("query") or ""), root, variable_values=body.get("variables"),
                              operation_name=body.get("operationName"))
        if result.data is None and result.errors:
            raise Answer(400, {"errors": [error.formatted for error in result.errors]})
        return dict(result.formatted)

    def _gpu_types(self, info: GraphQLResolveInfo, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        wanted = {(input or {}).get("id"), *((input or {}).get("ids") or [])} - {None}
        return [{**gpu, "lowestPrice": _lowest_price(gpu)} for gpu in GPU_TYPES if not wanted or gpu["id"] in wanted]

    def _myself(self, info: GraphQLResolveInfo) -> dict[str, Any]:
        return {"id": "user-1", "pods": [_graph_pod(m) for m in self.live()]}

    def _one_pod(self, info: GraphQLResolveInfo, input: dict[str, Any] | None = None) -> dict[str, Any] | None:
        machine = self.machines.get(str((input or {}).get("podId")))
        return None if machine is None or machine.state == "deleted" else _graph_pod(machine)

    def _deploy_on_demand(self, info: GraphQLResolveInfo, input: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._graph_deploy(input or {}, spot=False)

    def _rent_interruptable(self, info: GraphQLResolveInfo, input: dict[str, Any]) -> dict[str, Any]:
        return self._graph_deploy(input, spot=True)

    def _terminate(self, info: GraphQLResolveInfo, input: dict[str, Any]) -> None:
        if not self.delete(str(input.get("podId"))):
            raise GraphQLError(f"pod {input.get('podId')} not found")

    def _graph_deploy(self, given: dict[str, Any], spot: bool) -> dict[str, Any]:
        """A pod deployed by a GraphQL mutation's input (its ``env`` a list of key and value),
        with the REST API's checks; a refusal is the mutation's error."""
        if "22/tcp" not in str(given.get("ports") or "").split(","):
            raise GraphQLError("ports must expose 22/tcp")
        key = next((e.get("value") for e in given.get("env") or [] if e.get("key") == "PUBLIC_KEY"), "")
        try:
            machine = self._deploy(str(given.get("name") or ""), str(given.get("gpuTypeId")), int(given.get("gpuCount") or 1),
                                   str(given.get("imageName") or ""), str(key), spot, given.get("bidPerGpu"))
        except Answer as refused:
            raise GraphQLError(str(refused.body["error"])) from None
        return _graph_pod(machine)


def _status(machine: FakeMachine) -> str:
    return {"exited": "EXITED", "deleted": "TERMINATED"}.get(machine.state, "RUNNING")


def _lowest_price(gpu: dict[str, Any]) -> Any:
    """``lowestPrice(input)`` of a GPU type: the minimums and prices for ``gpuCount`` GPUs."""

    def resolve(info: GraphQLResolveInfo, input: dict[str, Any] | None = None) -> dict[str, Any]:
        count = int((input or {}).get("gpuCount") or 1)
        lowest = gpu["lowestPrice"]
        return {"gpuName": gpu["displayName"], "gpuTypeId": gpu["id"], "minVcpu": lowest["minVcpu"] * count,
                "minMemory": lowest["minMemory"] * count, "uninterruptablePrice": gpu["securePrice"] * count,
                "minimumBidPrice": gpu["secureSpotPrice"] * count, "stockStatus": "High"}

    return resolve


def _graph_pod(machine: FakeMachine) -> dict[str, Any]:
    """A pod as the GraphQL ``Pod`` type shows it."""
    up = machine.state == "running"
    ports = [{"ip": machine.address, "isIpPublic": True, "privatePort": 22, "publicPort": 22, "type": "tcp"}]
    return {
        "id": machine.id, "name": machine.name, "imageName": machine.image, "desiredStatus": _status(machine),
        "podType": "INTERRUPTABLE" if machine.spot else "RESERVED", "costPerHr": machine.price,
        "gpuCount": machine.extra.get("gpus", 1), "ports": "22/tcp",
        "runtime": {"uptimeInSeconds": 0, "ports": ports} if up else None,
    }
