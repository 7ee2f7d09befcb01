"""A local RunPod: the REST API's pods (``POST/GET /v1/pods``, ``GET/DELETE
/v1/pods/{podId}``) and the GraphQL ``gpuTypes`` query, in the shapes RunPod documents.
A pod refused for capacity gets RunPod's "no longer any instances available" error."""

from __future__ import annotations

import datetime
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine

GPU_TYPES = [
    {"id": "NVIDIA L4", "displayName": "L4", "memoryInGb": 24, "secureCloud": True, "communityCloud": True,
     "securePrice": 0.43, "communityPrice": 0.39, "secureSpotPrice": 0.22, "communitySpotPrice": 0.2,
     "maxGpuCount": 8, "lowestPrice": {"minVcpu": 4, "minMemory": 16}},
    {"id": "NVIDIA A100 80GB PCIe", "displayName": "A100 PCIe", "memoryInGb": 80, "secureCloud": True,
     "communityCloud": True, "securePrice": 1.64, "communityPrice": 1.19, "secureSpotPrice": 0.82,
     "communitySpotPrice": 0.6, "maxGpuCount": 8, "lowestPrice": {"minVcpu": 8, "minMemory": 117}},
]
BY_ID = {gpu["id"]: gpu for gpu in GPU_TYPES}


class FakeRunPod(FakeCloud):
    name = "runpod"
    prefix = "/v1"
    credentials = {"RUNPOD_API_KEY": TOKEN}

    def env(self) -> dict[str, str]:
        return {**super().env(), "SKYWARD_RUNPOD_GRAPHQL_API_URL": self.url.removesuffix(self.prefix)}

    def no_capacity(self, kind: str) -> Answer:
        return Answer(400, {
            "error": "There are no longer any instances available with the requested specifications. "
                     "Please refresh and try again.", "status": 400,
        })

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/graphql"):
            assert "gpuTypes" in body["query"]
            return {"data": {"gpuTypes": GPU_TYPES}}
        if (method, path) == ("POST", "/pods"):
            return self._pod(self._create(body))
        if (method, path) == ("GET", "/pods"):
            return [self._pod(m) for m in self.live()]
        if path.startswith("/pods/"):
            machine = self.machines.get(path.removeprefix("/pods/"))
            if machine is None or machine.state == "deleted":
                raise Answer(404, {"error": "pod not found", "status": 404})
            if method == "DELETE":
                self.delete(machine.id)
                return None
            return self._pod(machine)
        raise Answer(404, {"error": f"no route {method} {path}"})

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        for field in ("name", "imageName", "gpuTypeIds", "gpuCount", "ports", "env"):
            if field not in body:
                raise Answer(400, {"error": f"missing {field}", "status": 400})
        gpu = BY_ID.get(body["gpuTypeIds"][0])
        if gpu is None or "22/tcp" not in body["ports"]:
            raise Answer(400, {"error": "invalid gpuTypeIds or ports", "status": 400})
        spot = bool(body.get("interruptible"))
        price = gpu["secureSpotPrice" if spot else "securePrice"] * body["gpuCount"]
        return self.add(
            body["name"], gpu["id"], spot, body["imageName"], body["env"]["PUBLIC_KEY"], price, gpus=body["gpuCount"]
        )

    def _pod(self, machine: FakeMachine) -> dict[str, Any]:
        up = machine.state == "running"
        return {
            "id": machine.id, "name": machine.name, "image": machine.image, "gpuTypeId": machine.kind,
            "desiredStatus": {"exited": "EXITED", "deleted": "TERMINATED"}.get(machine.state, "RUNNING"),
            "publicIp": machine.address if up else "", "portMappings": {"22": 22} if up else {},
            "costPerHr": machine.price, "interruptible": machine.spot, "gpuCount": machine.extra.get("gpus", 1),
            "createdAt": datetime.datetime.fromtimestamp(machine.created, datetime.timezone.utc).isoformat(),
        }
