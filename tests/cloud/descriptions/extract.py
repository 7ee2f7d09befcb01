"""Cut, from a cloud's published API description, the part our client and fake use: the
operations named in ``KEPT`` and every schema they reach, with the descriptions' prose
(``description`` texts) left out and the source recorded under ``x-skyward-source``.
The full documents are megabytes; the extracts are what tests/cloud/described.py checks
exchanges against.

    python tests/cloud/descriptions/extract.py gcp compute.v1.json cloudbilling.v1.json
    python tests/cloud/descriptions/extract.py docker v1.41.yaml
    python tests/cloud/descriptions/extract.py digitalocean specification/DigitalOcean-public.v2.yaml
    python tests/cloud/descriptions/extract.py vultr blob/v0.0.1.json
    python tests/cloud/descriptions/extract.py runpod api-reference/openapi.json
    python tests/cloud/descriptions/extract.py vastai api-reference/openapi.yaml
    python tests/cloud/descriptions/extract.py lambda openapi/lambda-labs-openapi.json
    python tests/cloud/descriptions/extract.py scaleway openapi/_original/scaleway-instance-openapi.yml
    python tests/cloud/descriptions/extract.py hyperstack api/openapi.yaml
    python tests/cloud/descriptions/extract.py massedcompute v1/providers/massedcompute/openapi-v1.0.0.yaml

Each source file is the published one, found where the cloud's SOURCE.md says (same
repository, path and commit); the outputs replace the files beside this script. Run it
again with a newer source (and update SOURCE.md) to refresh a description."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
KEPT: dict[str, dict[str, list[str]]] = {
    "runpod": {"pods": ["GET /pods", "POST /pods", "GET /pods/{podId}", "DELETE /pods/{podId}"]},
    "vastai": {
        "api": [
            "POST /api/v0/bundles", "PUT /api/v0/asks/{id}", "POST /api/v0/instances/{id}/ssh",
            "GET /api/v0/instances/{id}", "DELETE /api/v0/instances/{id}", "GET /api/v1/instances",
        ],
    },
    "gcp": {
        "compute": [
            "compute.machineTypes.list", "compute.acceleratorTypes.list", "compute.instances.list",
            "compute.instances.insert", "compute.instances.get", "compute.instances.delete",
            "compute.zoneOperations.get", "compute.firewalls.list", "compute.firewalls.insert",
            "compute.firewalls.delete", "compute.globalOperations.get",
        ],
        "cloudbilling": ["cloudbilling.services.skus.list"],
    },
    "docker": {
        "engine": [
            "GET /_ping", "GET /info", "POST /images/create", "GET /images/{name}/json", "GET /networks",
            "POST /networks/create", "GET /networks/{id}", "DELETE /networks/{id}", "GET /containers/json",
            "POST /containers/create", "POST /containers/{id}/start", "GET /containers/{id}/json",
            "GET /containers/{id}/logs", "DELETE /containers/{id}",
        ],
    },
    "digitalocean": {
        "public": [
            "GET /v2/sizes", "GET /v2/account/keys", "POST /v2/account/keys",
            "DELETE /v2/account/keys/{ssh_key_identifier}", "GET /v2/droplets", "POST /v2/droplets",
            "GET /v2/droplets/{droplet_id}", "DELETE /v2/droplets/{droplet_id}", "POST /v2/tags",
            "DELETE /v2/tags/{tag_id}", "GET /v2/firewalls", "POST /v2/firewalls", "DELETE /v2/firewalls/{firewall_id}",
        ],
    },
    "vultr": {
        "api": [
            "GET /regions", "GET /plans", "GET /ssh-keys", "POST /ssh-keys", "DELETE /ssh-keys/{ssh-key-id}",
            "GET /instances", "POST /instances", "GET /instances/{instance-id}", "DELETE /instances/{instance-id}",
            "GET /firewalls", "POST /firewalls", "DELETE /firewalls/{firewall-group-id}",
            "POST /firewalls/{firewall-group-id}/rules", "DELETE /firewalls/{firewall-group-id}/rules/{firewall-rule-id}",
        ],
    },
    "lambda": {
        "cloud": [
            "GET /api/v1/instance-types", "GET /api/v1/ssh-keys", "POST /api/v1/ssh-keys", "DELETE /api/v1/ssh-keys/{id}",
            "POST /api/v1/instance-operations/launch", "POST /api/v1/instance-operations/terminate",
            "GET /api/v1/instances", "GET /api/v1/instances/{id}", "GET /api/v1/firewall-rulesets",
            "POST /api/v1/firewall-rulesets", "GET /api/v1/firewall-rulesets/{id}", "DELETE /api/v1/firewall-rulesets/{id}",
        ],
    },
    "scaleway": {
        "instance": [
            f"{method} /instance/v1/zones/{{zone}}{path}" for method, path in (
                ("GET", "/products/servers"), ("GET", "/products/servers/availability"), ("GET", "/servers"),
                ("POST", "/servers"), ("GET", "/servers/{server_id}"), ("DELETE", "/servers/{server_id}"),
                ("PATCH", "/servers/{server_id}/user_data/{key}"), ("POST", "/servers/{server_id}/action"),
                ("DELETE", "/volumes/{volume_id}"), ("GET", "/security_groups"), ("POST", "/security_groups"),
                ("GET", "/security_groups/{security_group_id}"), ("DELETE", "/security_groups/{security_group_id}"),
                ("POST", "/security_groups/{security_group_id}/rules"),
                ("DELETE", "/security_groups/{security_group_id}/rules/{security_group_rule_id}"),
            )
        ],
    },
    "massedcompute": {
        "vm": [
            "GET /gpu-inventory", "GET /images", "GET /instance", "GET /instance/{uuid}", "POST /instance/launch",
            "POST /instance/terminate", "GET /ssh-keys", "POST /ssh-keys", "DELETE /ssh-keys/{id}",
        ],
    },
    "hyperstack": {
        "infrahub": [
            "GET /core/flavors", "GET /pricebook", "GET /core/images", "GET /core/environments",
            "POST /core/environments", "DELETE /core/environments/{id}", "GET /core/keypairs", "POST /core/keypairs",
            "DELETE /core/keypair/{id}", "GET /core/virtual-machines", "POST /core/virtual-machines",
            "GET /core/virtual-machines/{vm_id}", "DELETE /core/virtual-machines/{vm_id}",
        ],
    },
}
"""Per cloud and document, the operations kept: a discovery document's method ids, an
OpenAPI document's ``METHOD /path``."""
SOURCES = {
    "runpod": "github.com/runpod/docs@a900806e253c4f8c16da27d1a4370e72456da4cb:api-reference/{name} "
              "(rest.runpod.io/v1/openapi.json)",
    "vastai": "github.com/vast-ai/docs@c624622622496828c1ae58edec481bba1f5d675d:api-reference/{name}",
    "gcp": "PyPI google-api-python-client 2.202.0, googleapiclient/discovery_cache/documents/{name} "
           "(wheel sha256 aaa90064c9bb642ff1d065b22ca8958a2cb6e345909cefe70d0e5452fc50e08b)",
    "docker": "github.com/moby/moby@b985e2313a8676e18072b442911fc8f64f17d440:api/docs/{name}",
    "digitalocean": "github.com/digitalocean/openapi@7c1300c479fed9c353cda9fc21cd968619552304:specification/{name}",
    "vultr": "github.com/vultr/vultr-ruby@d4e06e22ee74c802e97da9f0425301e2a5fd74e5:blob/{name}",
    "lambda": "https://docs.lambda.ai/api/cloud/spec.json, as mirrored in github.com/api-evangelist/lambda-labs"
              "@9589c610a5e9a29f2e868772572f9a9ea5e2519f:openapi/{name}",
    "scaleway": "Scaleway's Instance API v1 OpenAPI (scaleway.com), as mirrored in github.com/api-evangelist/scaleway"
                "@0212ec06fb134e0d41743cc54a3957fcd4d4bc80:openapi/_original/{name}",
    "massedcompute": "https://vm-docs.massedcompute.com/redocusaurus/plugin-redoc-0.yaml (the API reference's "
                     "'Download OpenAPI specification'), as mirrored in github.com/brevdev/cloud"
                     "@3f0a5e9bb8edd83ceca7e8e94963a8382ed9a311:v1/providers/massedcompute/{name}",
    "hyperstack": "https://infrahub-api-doc.nexgencloud.com/api.json, as NexGenCloud's Go SDK carries it: "
                  "github.com/NexGenCloud/hyperstack-sdk-go@cd34036f43f21aa5683b3ddcdb0800ceeda183df:api/{name}",
}
FIXED: dict[str, list[tuple[str, Any, str]]] = {
    "vastai": [
        ("/paths/~1api~1v0~1bundles/post/requestBody/content/application~1json/schema/properties/order",
         {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}},
         ("the document puts minItems/maxItems 2 on the list of sort entries, where its own text says each entry "
          "holds two elements (field, direction); the official CLI (github.com/vast-ai/vast-cli@55679830:vast.py, "
          "search__offers) sends a list of [field, direction] pairs, one pair for one field")),
        ("/paths/~1api~1v0~1instances~1{id}/get/responses/200/content/application~1json/schema/properties/instances/"
         + "properties/ports",
         {"type": ["object", "null"], "additionalProperties": {"type": "array", "items": {
             "type": "object", "properties": {"HostIp": {"type": "string"}, "HostPort": {"type": "string"}}}}},
         ("the document types an instance's ports as a list of integers here and as Docker's port map "
          "(\"22/tcp\": [{HostIp, HostPort}]) in GET /api/v1/instances; the official CLI reads the map "
          "(vast-cli@55679830:vast.py, ssh_url: ports.get(\"22/tcp\")[0][\"HostPort\"])")),
    ],
    "massedcompute": [
        ("/paths/~1instance~1launch/post/requestBody/content/application~1json/schema/required",
         ["imageId", "productName", "regionName"],
         ("the document requires 'image_id', a field it does not have: its property is imageId (required: true), "
          "as Massed Compute's MCP tool catalog (github.com/Massed-Compute/massed-compute-mcp@d11c49a:tools.json, "
          "instances_launch) requires it")),
        *[(pointer, value, ("the document states its key in prose only (info.description: 'We leverage Bearer token "
                            "authentication on our endpoints ... | Authorization | Bearer {{api_token}} |'), not as a "
                            "security scheme; put here as the scheme it states"))
          for pointer, value in (("/security", [{"bearerAuth": []}]),
                                 ("/components", {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}}))],
    ],
    "hyperstack": [
        (("/paths/~1core~1virtual-machines/post/requestBody/content/application~1json/schema/properties/"
          "security_rules/items/required"), ["direction", "ethertype", "protocol", "remote_ip_prefix"],
         ("the SDK's build (scripts/fix_api_spec.py, marked 'UNSYNCED') adds 'virtual_machine_id' to the required "
          "fields of Create_Security_Rule_Payload, a field the schema does not have: a VM being created has no id "
          "yet, and the published api.json does not require it")),
    ],
}
"""Per cloud, the document's own slips corrected in the extract (JSON pointer, the value
put there, why), each recorded under ``x-skyward-fixed``."""
GOVULTR = "github.com/vultr/govultr@9ee451b0dcec73936d0ed318b847d98d60f986dc"
ADDED: dict[str, dict[str, dict[str, Any]]] = {
    "vultr": {
        "plans": {
            "gpu_vram_gb": {"type": "integer", "x-skyward-from": f"{GOVULTR}:plans.go Plan.GPUVRAM"},
            "gpu_type": {"type": "string", "x-skyward-from": f"{GOVULTR}:plans.go Plan.GPUType"},
        },
        "instance": {
            name: {"type": kind, "x-skyward-from": f"{GOVULTR}:instance.go Instance, and the document's own examples"}
            for name, kind in (("v6_network", "string"), ("v6_main_ip", "string"), ("v6_network_size", "integer"))
        },
    },
}
"""Per cloud, fields the document's schemas (by name under ``components/schemas``) lack
that the cloud's official SDK reads and the API sends, each marked with where it is
published (``x-skyward-from``): Vultr's OpenAPI has no GPU fields on a plan, and lists
``v6_networks`` on an instance where its own examples and govultr have ``v6_main_ip``."""


OPENAPI3 = {
    "digitalocean": ("public", "public.v2.json"), "runpod": ("pods", "rest.v1.json"), "vastai": ("api", "api.json"),
    "vultr": ("api", "api.v2.json"), "lambda": ("cloud", "cloud.v1.json"), "scaleway": ("instance", "instance.v1.json"),
    "massedcompute": ("vm", "vm.v1.json"), "hyperstack": ("infrahub", "infrahub.v1.json"),
}
"""The clouds whose description is OpenAPI 3: which of ``KEPT`` each keeps, and the file
written (``ADDED`` and ``FIXED`` applied where they name the cloud)."""


def yaml_of(text: str) -> Any:
    """``text`` read as YAML 1.2 reads it: ``off``, ``no``, ``on`` and ``yes`` stay words
    (an enum of DigitalOcean's has ``off``), times stay text (PyYAML reads YAML 1.1)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    return yaml.load(text, Loader=Loader)


def prose_free(value: Any) -> Any:
    """``value`` without its ``description`` texts (a property named so stays: it is an object)."""
    if isinstance(value, dict):
        return {k: prose_free(v) for k, v in value.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(value, list):
        return [prose_free(v) for v in value]
    return value


def refs(value: Any) -> Iterator[str]:
    """Every ``$ref`` below ``value``."""
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            yield value["$ref"]
        for inner in value.values():
            yield from refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from refs(inner)


def reached(schemas: dict[str, Any], start: Any, name_of: Any) -> dict[str, Any]:
    """The schemas ``start`` reaches, by name (``name_of`` turns a ``$ref`` into one)."""
    found: dict[str, Any] = {}
    todo = [name_of(ref) for ref in refs(start)]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = schemas[name]
        todo += [name_of(ref) for ref in refs(schemas[name])]
    return dict(sorted(found.items()))


def discovery(document: dict[str, Any], kept: list[str]) -> dict[str, Any]:
    """A discovery document with only the methods ``kept`` (by id) and the schemas they reach."""

    def resources(tree: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, resource in tree.items():
            methods = {k: m for k, m in resource.get("methods", {}).items() if m["id"] in kept}
            inner = resources(resource.get("resources", {}))
            if methods or inner:
                out[name] = {**({"methods": methods} if methods else {}), **({"resources": inner} if inner else {})}
        return out

    tree = resources(document["resources"])
    top = {k: document[k] for k in ("kind", "name", "version", "revision", "rootUrl", "servicePath", "baseUrl",
                                    "parameters", "auth") if k in document}
    return {**top, "resources": tree, "schemas": reached(document["schemas"], tree, lambda ref: ref)}


def openapi(document: dict[str, Any], kept: list[str]) -> dict[str, Any]:
    """A Swagger 2.0 document with only the operations ``kept`` and the definitions they reach."""
    paths: dict[str, Any] = {}
    for entry in kept:
        method, path = entry.split(" ", 1)
        item = document["paths"][path]
        paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})[method.lower()] = item[method.lower()]
    top = {k: document[k] for k in ("swagger", "info", "basePath", "schemes", "consumes", "produces",
                                    "securityDefinitions", "security") if k in document}
    definitions = reached(document["definitions"], paths, lambda ref: ref.rsplit("/", 1)[-1])
    return {**top, "paths": paths, "definitions": definitions}


@cache
def document_of(file: Path) -> Any:
    """The YAML (or JSON) ``file``, read once."""
    return json.loads(file.read_text()) if file.suffix == ".json" else yaml_of(file.read_text())


def bundled(file: Path, pointer: str = "", seen: tuple[tuple[Path, str], ...] = ()) -> Any:
    """The node at ``pointer`` of the YAML or JSON ``file`` with every ``$ref`` below it
    (to another file or within one) replaced by what it names; a reference back into
    itself (a recursive schema) is left open (``{}``); code samples are dropped."""
    node: Any = document_of(file)
    for part in filter(None, pointer.split("/")):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    seen = (*seen, (file, pointer))

    def inline(value: Any) -> Any:
        if isinstance(value, dict):
            if isinstance(value.get("$ref"), str):
                target, _, inner = value["$ref"].partition("#")
                where = (file.parent / target).resolve() if target else file
                return {} if (where, inner) in seen else bundled(where, inner, seen)
            return {k: inline(v) for k, v in value.items() if k != "x-codeSamples"}
        if isinstance(value, list):
            return [inline(v) for v in value]
        return value

    return inline(node)


def openapi3(source: Path, kept: list[str], added: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """An OpenAPI 3 document (one file, or split over several), bundled into one with only
    the operations ``kept`` and the parameters their paths share (every reference
    inlined), ``added``'s fields first put into the named schemas, and the security
    schemes and requirement it declares for every operation."""
    root = document_of(source.resolve())
    for name, properties in (added or {}).items():
        root["components"]["schemas"][name]["properties"].update(properties)
    paths: dict[str, Any] = {}
    for entry in kept:
        method, path = entry.split(" ", 1)
        pointer = "/paths/" + path.replace("~", "~0").replace("/", "~1")
        shared = root["paths"][path].get("parameters")
        item = paths.setdefault(path, {"parameters": bundled(source.resolve(), pointer + "/parameters")} if shared else {})
        item[method.lower()] = bundled(source.resolve(), f"{pointer}/{method.lower()}")
    info = {k: root["info"][k] for k in ("title", "version", "license") if k in root["info"]}
    security = {"security": root["security"]} if "security" in root else {}
    schemes = root.get("components", {}).get("securitySchemes")
    components = {"components": {"securitySchemes": bundled(source.resolve(), "/components/securitySchemes")}}
    return {"openapi": root["openapi"], "info": info, **security, **(components if schemes else {}), "paths": paths}


def fixed(extract: dict[str, Any], fixes: list[tuple[str, Any, str]]) -> dict[str, Any]:
    """``extract`` with each of ``fixes`` (a JSON pointer, its new value, why) made and recorded."""
    for pointer, value, why in fixes:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.strip("/").split("/")]
        node = extract
        for part in parents:
            node = node[part]
        was, node[last] = node.get(last), value
        extract.setdefault("x-skyward-fixed", []).append({"at": pointer, "was": was, "now": value, "why": why})
    return extract


def main(cloud: str, sources: list[str]) -> None:
    for source in map(Path, sources):
        if cloud in OPENAPI3:
            document, file = OPENAPI3[cloud]
            extract = fixed(openapi3(source, KEPT[cloud][document], ADDED.get(cloud)), FIXED.get(cloud, []))
            out = HERE / cloud / file
        elif source.suffix == ".json":
            document = json.loads(source.read_text())
            name = document["name"]
            extract = discovery(document, KEPT[cloud][name])
            out = HERE / cloud / f"{name}.{document['version']}.json"
        else:
            document = yaml_of(source.read_text())
            extract = openapi(document, KEPT[cloud]["engine"])
            out = HERE / cloud / f"engine.v{document['info']['version']}.json"
        extract = {"x-skyward-source": SOURCES[cloud].format(name=source.name), **prose_free(extract)}
        out.write_text(json.dumps(extract, indent=1, default=str) + "\n")
        print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
