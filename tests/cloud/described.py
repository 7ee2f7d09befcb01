"""The clouds' own descriptions of their APIs (pinned under ``descriptions/<cloud>/``, see
each SOURCE.md) as a check of one exchange with a fake: the request (method, path, path
and query parameters, JSON body) against the operation the description defines there,
and the answer (status, JSON body) against that operation's response schema. Each
violation is a message naming the operation and the field (``violations``); an exchange
the description has nothing against yields none.

Two kinds of description: Google's discovery documents (GCP: Compute Engine and the
Cloud Billing Catalog) and OpenAPI (2.0: Docker's Engine API; 3.0, bundled into one file
by ``descriptions/extract.py``: DigitalOcean's API v2, Vultr's API v2; 3.1: Lambda's Cloud
API v1 and Scaleway's Instance API v1). Both are turned into JSON Schema
(draft 2020-12, checked with ``jsonschema``) that is strict where the published one is
silent: an object with declared properties takes no others (a misspelt field is a
violation, as Google's "Unknown name" 400 and a field Docker silently ignores both are).
``allOf`` members are merged into one object, ``nullable`` (``x-nullable``) admits null,
and a ``oneOf`` that nothing fits is reported by the errors of the member that fits best.
A discovery field required for a method (its ``annotations.required``) is required in
that method's request. A success answered with a status the operation does not list is a
violation even where a ``default`` answer is described; so is an error status it does not
list, where it lists any. Answers with an error status are checked only where the
description has a schema for that status (OpenAPI); discovery documents and Scaleway's
describe no errors. A property named ``<key>`` alone stands for every key of a map
(Scaleway's ``<serverKey>``). Query values are strings: an integer parameter takes
digits, a boolean ``true``, ``false``, ``1`` or ``0``. Every ``format`` a schema gives a
string or an integer holds too (``FORMATS``: RFC 3339 times, sized integers, uuids, base64,
addresses), in bodies, answers and parameters alike.

Given the request's headers, the ones that carry meaning are checked as well: the key,
against the alternatives of the operation's security requirement (or the document's)
made of the schemes the document declares (``http`` Bearer or Basic, an ``apiKey``
header or query parameter, OAuth 2.0 as a Bearer token; a discovery method with scopes
takes an OAuth 2.0 token); the ``Content-Type`` of a body, against the media types the
operation takes; and header parameters, as query ones are.

A GraphQL endpoint (RunPod's ``/graphql``, beside its REST API) is checked against a
schema (SDL) with graphql-core (``GraphQL``): the query validated and its variables
coerced, the answer's ``data`` held to what the query selects, each field by its path. A
cloud whose paths its description writes without a trailing ``/`` while its clients send
one (Vast.ai) has the ``/`` left out before matching (``slash``)."""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

DESCRIPTIONS = Path(__file__).parent / "descriptions"
MESSAGE_LENGTH = 240
"""The longest text of one schema error kept in a violation (an enum lists every value)."""
BOOLEANS = ("true", "false", "1", "0")


RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")
RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1),
          "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}
"""The integers each sized format holds (OpenAPI's int32/int64; Google's unsigned ones)."""
FORMATS = jsonschema.FormatChecker(formats=())
"""The string and integer ``format``s a value is held to: JSON Schema's own (``uuid``,
``email``, ``ipv4``, ``ipv6``, ``date``, ``time``, ...; ``date-time`` as RFC 3339 has it,
which Google writes ``google-datetime``) and those OpenAPI and the clouds add: the sized
integers (``int32`` ... ``uint64``, also as Google's decimal strings), ``byte`` (base64),
``uri``, ``ip-address``, and a network (``ipv4network``, ``CIDR``). A format no one
defines (``float``, ``password``, ``currency``) holds nothing."""
FORMATS.checkers.update(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)


def _rfc3339(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if RFC3339.fullmatch(value) is None:
        return False
    try:
        datetime.datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


def _sized(low: int, high: int) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
            value = int(value)
        return not isinstance(value, int) or isinstance(value, bool) or low <= value <= high
    return check


def _base64(value: object) -> bool:
    try:
        return not isinstance(value, str) or base64.b64decode(value, validate=True) is not None
    except (binascii.Error, ValueError):
        return False


def _parsed(parse: Callable[[str], object]) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        try:
            return not isinstance(value, str) or parse(value) is not None
        except ValueError:
            return False
    return check


def _uri(value: object) -> bool:
    return not isinstance(value, str) or re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s]+", value) is not None


for _name in ("date-time", "google-datetime", "dateTime"):
    FORMATS.checks(_name)(_rfc3339)
for _name, (_low, _high) in RANGES.items():
    FORMATS.checks(_name)(_sized(_low, _high))
FORMATS.checks("byte")(_base64)
FORMATS.checks("uri")(_uri)
FORMATS.checks("ip-address")(_parsed(ipaddress.ip_address))
for _name in ("ipv4network", "CIDR"):
    FORMATS.checks(_name)(_parsed(lambda text: ipaddress.ip_network(text, strict=False)))


@dataclass(frozen=True)
class Credential:
    """One of a description's security schemes: the header or query parameter ``name``
    that carries the key, its value starting with ``prefix`` (``Bearer ``, ``Basic ``;
    "" for the bare key)."""

    scheme: str
    where: str
    name: str
    prefix: str = ""

    def carried(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Whether a request with ``headers`` (lower-case names) and ``query`` carries it."""
        given = headers.get(self.name.lower()) if self.where == "header" else query.get(self.name)
        return given is not None and given.lower().startswith(self.prefix.lower()) and len(given) > len(self.prefix)

    def __str__(self) -> str:
        return f"{self.where} {self.name!r}" + (f" as '{self.prefix}<key>'" if self.prefix else "")


def credential(scheme: str, spec: Mapping[str, Any]) -> Credential | None:
    """The credential an OpenAPI security scheme (3.x ``securitySchemes``, 2.0
    ``securityDefinitions``) describes; None: one carried otherwise (a cookie)."""
    kind = spec.get("type")
    if kind == "http":
        return Credential(scheme, "header", "Authorization", f"{str(spec['scheme']).capitalize()} ")
    if kind == "basic":
        return Credential(scheme, "header", "Authorization", "Basic ")
    if kind in ("oauth2", "openIdConnect"):
        return Credential(scheme, "header", "Authorization", "Bearer ")
    if kind == "apiKey" and spec.get("in") in ("header", "query"):
        return Credential(scheme, str(spec["in"]), str(spec["name"]))
    return None


def requirements(listed: Iterable[Mapping[str, Any]], schemes: Mapping[str, Any]) -> tuple[tuple[Credential, ...], ...]:
    """A security requirement list as alternatives of credentials; () where one of them
    asks for nothing (``{}``: the key is optional) or the list is empty. An alternative
    naming a scheme the document does not define is left out."""
    alternatives: list[tuple[Credential, ...]] = []
    for requirement in listed:
        if not requirement:
            return ()
        found = [credential(name, schemes[name]) for name in requirement if name in schemes]
        if len(found) == len(requirement) and all(found):
            alternatives.append(tuple(c for c in found if c is not None))
    return tuple(alternatives)


@dataclass(frozen=True)
class Parameter:
    """A path, query or header parameter: its JSON Schema (of the value as text is read) and whether it must be given."""

    name: str
    where: str
    schema: Mapping[str, Any]
    required: bool = False


@dataclass
class Described:
    """One operation of a description: ``path`` is its template below the fake's prefix
    (``{name}`` one segment; a last resort lets it span several, as an image name does)."""

    id: str
    method: str
    path: str
    parameters: dict[str, Parameter]
    body: Mapping[str, Any] | None
    """The request body's JSON Schema; None: it takes none."""
    body_required: bool
    answers: dict[str, Mapping[str, Any] | None]
    """By status ("200", "default"; "2XX" for any success), the answer's JSON Schema (None: no body described)."""
    strict_status: bool
    """Whether a status ``answers`` lacks is a violation (OpenAPI lists them; discovery only the success)."""
    defs: Mapping[str, Any] = field(repr=False, default_factory=dict)
    security: tuple[tuple[Credential, ...], ...] = ()
    """The ways a request may carry its key: any one alternative, each credential of it
    (none: the operation takes requests without one)."""
    media: tuple[str, ...] = ("application/json",)
    """The media types its request body may be sent as (the ``Content-Type`` it takes)."""
    _validators: dict[str, jsonschema.Draft202012Validator] = field(repr=False, default_factory=dict)

    def match(self, path: str, loose: bool) -> dict[str, str] | None:
        """The path parameters of ``path`` when it is this operation's (``loose``: a
        parameter may span segments), else None."""
        pattern = "/".join(
            f"(?P<{_group(part)}>{'.+' if loose else '[^/]+'})" if part.startswith("{") else re.escape(part)
            for part in self.path.split("/")
        )
        found = re.fullmatch(pattern, path)
        if found is None:
            return None
        names = [part.strip("{}+") for part in self.path.split("/") if part.startswith("{")]
        return dict(zip(names, found.groups(), strict=True))

    def validator(self, key: str, schema: Mapping[str, Any]) -> jsonschema.Draft202012Validator:
        """The validator of ``schema`` (the body's, or the answer's of status ``key``), made once."""
        if key not in self._validators:
            self._validators[key] = jsonschema.Draft202012Validator({**schema, "$defs": self.defs},
                                                                     format_checker=FORMATS)
        return self._validators[key]


def _group(part: str) -> str:
    return "p_" + re.sub(r"\W", "_", part.strip("{}+"))


class Description:
    """A cloud's described operations; ``exempt`` maps paths (below the fake's prefix) that
    no description covers to why (checked as nothing: the fakes declare them)."""

    def __init__(self, name: str, operations: Iterable[Described], exempt: Mapping[str, str] | None = None,
                 common: Mapping[str, Parameter] | None = None, graphql: Mapping[str, GraphQL] | None = None,
                 slash: bool = False, graphql_security: tuple[tuple[Credential, ...], ...] = ()) -> None:
        self.name = name
        self.operations = list(operations)
        self.exempt = dict(exempt or {})
        self.common = dict(common or {})
        """Query parameters every operation takes (a discovery document's ``parameters``)."""
        self.graphql = dict(graphql or {})
        """By path, a GraphQL endpoint (its schema checks what is posted there)."""
        self.graphql_security = graphql_security
        """The credentials a GraphQL endpoint takes (a schema describes none)."""
        self.slash = slash
        """Whether a path's trailing ``/`` is left out before it is matched (Vast.ai's API
        takes both; its paths are described without, its own CLI sends one)."""

    def find(self, method: str, path: str) -> tuple[Described, dict[str, str]] | None:
        """The operation serving ``method path`` and its path parameters (a parameter
        spans one segment where any operation matches so), else None."""
        for loose in (False, True):
            for operation in self.operations:
                values = operation.match(path, loose)
                if values is not None and operation.method == method:
                    return operation, values
        return None

    def violations(self, method: str, path: str, query: Mapping[str, str], body: Any, status: int,
                   answer: Any, headers: Mapping[str, str] | None = None) -> list[str]:
        """What in this exchange the description does not define (the request) or would
        not produce (the answer), each naming the operation and the field; with the
        request's ``headers``, also the key it carries (against the security schemes),
        its ``Content-Type`` and its header parameters."""
        if self.slash:
            path = path.rstrip("/") or "/"
        if path in self.exempt:
            return []
        if path in self.graphql:
            where = f"{self.name} GraphQL ({method} {path})"
            found = self.graphql[path].violations(method, body, status, answer)
            if headers is not None:
                found = [*_carried(self.graphql_security, _lowered(headers), query), *found]
            return [f"{where}: {text}" for text in found]
        found = self.find(method, path)
        if found is None:
            paths = sorted({op.method for op in self.operations if op.match(path, True) is not None})
            said = f"only {', '.join(paths)} there" if paths else "no operation has this path"
            return [f"{self.name}: {method} {path} is not described ({said})"]
        operation, values = found
        where = f"{self.name} {operation.id} ({operation.method} {operation.path})"
        problems = [f"{where}: {text}" for text in _request(operation, values, query, body, self.common)]
        if headers is not None:
            problems += [f"{where}: {text}" for text in _headers(operation, _lowered(headers), query, body)]
        problems += [f"{where}: {text}" for text in _answer(operation, status, answer)]
        return problems


# ---------------------------------------------------------------------------- the checks


def _request(operation: Described, values: Mapping[str, str], query: Mapping[str, str], body: Any,
             common: Mapping[str, Parameter]) -> list[str]:
    problems: list[str] = []
    for name, value in values.items():
        parameter = operation.parameters.get(name)
        if parameter is not None and parameter.where == "path":
            problems += [f"path parameter {name!r}: {text}" for text in _value(parameter, value)]
    keys = {c.name for alternative in operation.security for c in alternative if c.where == "query"}
    for name, value in query.items():
        parameter = operation.parameters.get(name) or common.get(name)
        if parameter is None and name in keys:
            continue
        if parameter is None or parameter.where != "query":
            problems.append(f"query parameter {name!r} is not described")
            continue
        problems += [f"query parameter {name!r}: {text}" for text in _value(parameter, value)]
    for parameter in operation.parameters.values():
        if parameter.where == "query" and parameter.required and parameter.name not in query:
            problems.append(f"query parameter {parameter.name!r} is required")
    empty = body in (None, "", b"")
    if operation.body is None:
        if not empty:
            problems.append("the request has a body; the operation takes none")
    elif empty:
        if operation.body_required:
            problems.append("the request body is required")
    else:
        problems += [f"request body {text}" for text in _schema_errors(operation, "body", operation.body, body)]
    return problems


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _carried(security: tuple[tuple[Credential, ...], ...], headers: Mapping[str, str],
             query: Mapping[str, str]) -> list[str]:
    """What is wrong with the key a request carries: none of the alternatives ``security`` describes."""
    if not security or any(all(c.carried(headers, query) for c in alternative) for alternative in security):
        return []
    said = " or ".join(" and ".join(map(str, alternative)) for alternative in security)
    return [f"the request carries none of the credentials described ({said})"]


def _headers(operation: Described, headers: Mapping[str, str], query: Mapping[str, str], body: Any) -> list[str]:
    """What is wrong with the headers that carry meaning: the key, the body's media type, the header parameters."""
    problems = _carried(operation.security, headers, query)
    if body not in (None, "", b"") and operation.body is not None:
        given = headers.get("content-type", "").split(";")[0].strip().lower()
        if not any(_media_matches(given, media) for media in operation.media):
            problems.append(f"the request body is sent as {given or 'no Content-Type'!r}; the operation takes "
                            f"{', '.join(operation.media)}")
    for parameter in operation.parameters.values():
        if parameter.where != "header":
            continue
        value = headers.get(parameter.name.lower())
        if value is None:
            if parameter.required:
                problems.append(f"header {parameter.name!r} is required")
        else:
            problems += [f"header {parameter.name!r}: {text}" for text in _value(parameter, value)]
    return problems


def _media_matches(given: str, media: str) -> bool:
    media = media.lower()
    return media in (given, "*/*") or media.endswith("/*") and given.startswith(media[:-1])


def _value(parameter: Parameter, value: str) -> list[str]:
    """What is wrong with a path or query value (text) for ``parameter``."""
    schema = parameter.schema
    kind = schema.get("type")
    if kind == "integer":
        if not re.fullmatch(r"-?[0-9]+", value):
            return [f"{value!r} is not an integer"]
        number = int(value)
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and number < float(low) or high is not None and number > float(high):
            return [f"{value} is outside [{low}, {high}]"]
    elif kind == "boolean" and value not in BOOLEANS:
        return [f"{value!r} is not a boolean"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{value!r} is not one of {schema['enum']}"[:MESSAGE_LENGTH]]
    pattern = schema.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        return [f"{value!r} does not match {pattern!r}"]
    form = schema.get("format")
    if form and not FORMATS.conforms(int(value) if kind == "integer" else value, form):
        return [f"{value!r} is not a {form!r}"]
    return []


def _answer(operation: Described, status: int, answer: Any) -> list[str]:
    code = str(status)
    key = next((k for k in (code, f"{code[0]}XX", "default") if k in operation.answers), None)
    successes = [k for k in operation.answers if k.startswith("2")]
    if code.startswith("2") and key == "default" and successes:
        return [f"answer status {status} is not described (it answers {', '.join(successes)})"]
    if key is None:
        errors_described = any(not k.startswith("2") for k in operation.answers)
        if operation.strict_status and (code.startswith("2") or errors_described):
            return [f"answer status {status} is not described (only {', '.join(operation.answers)})"]
        return []
    schema = operation.answers[key]
    if schema is None or isinstance(answer, bytes):
        return []
    if answer is None:
        return [f"answer {status} has no body; the description gives it one"]
    return [f"answer {status} {text}" for text in _schema_errors(operation, key, schema, answer)]


def _schema_errors(operation: Described, key: str, schema: Mapping[str, Any], value: Any) -> list[str]:
    found = [inner for error in operation.validator(key, schema).iter_errors(value) for inner in _expanded(error)]
    found.sort(key=lambda e: list(map(str, e.absolute_path)))
    return [f"field {_where(e.absolute_path)}: {e.message[:MESSAGE_LENGTH]}" for e in found]


def _expanded(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """``error`` itself, or where none of a ``oneOf``/``anyOf`` fits, the errors of the
    alternative that fits best (the fewest): they name the field, the ``oneOf`` does not."""
    if not error.context:
        return [error]
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for inner in error.context:
        branches.setdefault(inner.relative_schema_path[0], []).append(inner)
    return [found for inner in min(branches.values(), key=len) for found in _expanded(inner)]


def _where(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return repr(text or "(the whole body)")


# ---------------------------------------------------------------------------- Google's discovery documents

DISCOVERY_TYPES = {"any": {}, "object": {"type": "object"}}


def _discovery_schema(schema: Mapping[str, Any], method: str | None) -> dict[str, Any]:
    """A discovery schema as JSON Schema; ``method``: the id whose required fields it requires."""
    if "$ref" in schema:
        return {"$ref": f"#/$defs/{schema['$ref']}"}
    kind = schema.get("type", "any")
    out: dict[str, Any] = dict(DISCOVERY_TYPES.get(kind, {"type": kind}))
    if "enum" in schema:
        out["enum"] = schema["enum"]
    if kind == "string" and schema.get("format") in ("int64", "uint64"):
        out["pattern"] = r"^-?[0-9]+$"
    if "format" in schema:
        out["format"] = schema["format"]
    if kind == "array":
        out["items"] = _discovery_schema(schema.get("items", {}), method)
    if kind == "object":
        properties = schema.get("properties", {})
        if properties:
            out["properties"] = {k: _discovery_schema(v, method) for k, v in properties.items()}
            required = [k for k, v in properties.items() if method in v.get("annotations", {}).get("required", [])]
            if required:
                out["required"] = required
        if "additionalProperties" in schema:
            out["additionalProperties"] = _discovery_schema(schema["additionalProperties"], method)
        elif properties:
            out["additionalProperties"] = False
    return out


def _discovery_parameter(name: str, spec: Mapping[str, Any]) -> Parameter:
    schema = {k: spec[k] for k in ("type", "enum", "pattern", "minimum", "maximum", "format") if k in spec}
    return Parameter(name, spec.get("location", "query"), schema, bool(spec.get("required")))


def discovery(name: str, document: Mapping[str, Any], root: str = "") -> tuple[list[Described], dict[str, Parameter]]:
    """The methods of a discovery document, their paths (``flatPath``) below ``root``,
    and the query parameters every method takes. A method with OAuth 2.0 ``scopes``
    (the document's ``auth``) takes an access token as ``Authorization: Bearer``."""
    oauth = "oauth2" in document.get("auth", {})
    answers_defs = {k: _discovery_schema(v, None) for k, v in document["schemas"].items()}
    operations: list[Described] = []

    def walk(resources: Mapping[str, Any]) -> None:
        for resource in resources.values():
            for method in resource.get("methods", {}).values():
                body = method.get("request")
                defs = answers_defs
                if body is not None:
                    defs = {**answers_defs, **{k: _discovery_schema(v, method["id"])
                                               for k, v in document["schemas"].items()}}
                response = method.get("response")
                operations.append(Described(
                    method["id"], method["httpMethod"], f"{root}/{method.get('flatPath', method['path'])}",
                    {k: _discovery_parameter(k, v) for k, v in method.get("parameters", {}).items()},
                    None if body is None else _discovery_schema(body, method["id"]), body is not None,
                    {"2XX": None if response is None else _discovery_schema(response, None)}, False, defs,
                    ((Credential("oauth2", "header", "Authorization", "Bearer "),),) if oauth and method.get("scopes")
                    else (),
                ))
            walk(resource.get("resources", {}))

    walk(document["resources"])
    common = {k: _discovery_parameter(k, v) for k, v in document.get("parameters", {}).items()}
    return operations, common


# ---------------------------------------------------------------------------- OpenAPI 2.0 (Swagger) and 3.0

PLACEHOLDER = re.compile(r"<\w+>")
"""A property that stands for any name (Scaleway's ``<serverKey>``): the schema of every value of a map."""
KEYWORDS = ("enum", "const", "minimum", "maximum", "pattern", "minLength", "maxLength", "minItems", "maxItems",
            "format")
"""What of an OpenAPI schema carries over to JSON Schema as it is."""


def _resolved(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        schema = definitions[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _merged(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with the members of its ``allOf`` merged into it (one object)."""
    if "allOf" not in schema:
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties: dict[str, Any] = dict(merged.get("properties", {}))
    required: list[str] = list(merged.get("required", []))
    for member in schema["allOf"]:
        member = _merged(_resolved(member, definitions), definitions)
        properties.update(member.get("properties", {}))
        required += member.get("required", [])
        for key in ("type", "additionalProperties", "nullable", "x-nullable", "oneOf", "anyOf"):
            if key in member and key not in merged:
                merged[key] = member[key]
    merged.update(type=merged.get("type", "object"), properties=properties, required=required)
    return merged


def _openapi_schema(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAPI schema as JSON Schema (see the module's docstring)."""
    if "$ref" in schema:
        return {"$ref": f"#/$defs/{schema['$ref'].rsplit('/', 1)[-1]}"}
    schema = _merged(schema, definitions)
    nullable = bool(schema.get("x-nullable") or schema.get("nullable"))
    out: dict[str, Any] = {k: schema[k] for k in KEYWORDS if k in schema}
    if "type" in schema:
        out["type"] = [schema["type"], "null"] if nullable else schema["type"]
    if "enum" in out and nullable:
        out["enum"] = [*out["enum"], None]
    for key in ("oneOf", "anyOf"):
        if key in schema:
            out[key] = [_openapi_schema(member, definitions) for member in schema[key]]
    if "items" in schema:
        out["items"] = _openapi_schema(schema["items"], definitions)
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if len(properties) == 1 and PLACEHOLDER.fullmatch(next(iter(properties))):
        properties, extra = {}, next(iter(properties.values()))
    if properties:
        out["properties"] = {k: _openapi_schema(v, definitions) for k, v in properties.items()}
    if isinstance(schema.get("required"), list) and schema["required"]:  # Massed Compute's has required: true
        out["required"] = list(schema["required"])
    if isinstance(extra, Mapping):
        out["additionalProperties"] = _openapi_schema(extra, definitions)
    elif extra is not None:
        out["additionalProperties"] = extra
    elif properties:
        out["additionalProperties"] = False
    return out


def _json(content: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema of an OpenAPI 3 ``content``: its JSON one, else its only one (Scaleway's
    user data is ``*/*``, a string); None: no body described."""
    content = content or {}
    media = content.get("application/json") or (next(iter(content.values())) if len(content) == 1 else {})
    return media.get("schema")


def openapi(document: Mapping[str, Any], below: str = "") -> list[Described]:
    """The operations of an OpenAPI 2.0 or 3.x document, their paths as the document has
    them less ``below`` (the fake's prefix where the paths hold it; 3.x: every reference
    inlined, as ``extract.py`` leaves it), each with the credentials its ``security`` (or
    the document's) asks for and the media types its body may be sent as."""
    definitions = document.get("definitions", {})
    schemes = document.get("components", {}).get("securitySchemes") or document.get("securityDefinitions") or {}
    consumes = tuple(document.get("consumes", ("application/json",)))
    defs = {k: _openapi_schema(v, definitions) for k, v in definitions.items()}
    operations: list[Described] = []
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method, spec in item.items():
            if method == "parameters":
                continue
            parameters: dict[str, Parameter] = {}
            body: dict[str, Any] | None = None
            body_required = False
            media = tuple(spec.get("consumes", consumes))
            if "requestBody" in spec:
                media = tuple(spec["requestBody"].get("content") or media)
                raw = _json(spec["requestBody"].get("content"))
                body = None if raw is None else _openapi_schema(raw, definitions)
                body_required = bool(spec["requestBody"].get("required"))
            for parameter in [*shared, *spec.get("parameters", [])]:
                if parameter["in"] == "body":
                    body, body_required = _openapi_schema(parameter["schema"], definitions), bool(parameter.get("required"))
                elif parameter["in"] in ("path", "query", "header"):
                    given = parameter.get("schema", parameter)
                    schema = {k: given[k] for k in ("type", "enum", "pattern", "minimum", "maximum", "format")
                              if k in given}
                    parameters[parameter["name"]] = Parameter(parameter["name"], parameter["in"], schema,
                                                              bool(parameter.get("required")))
            answers: dict[str, Mapping[str, Any] | None] = {}
            for code, answer in spec.get("responses", {}).items():
                raw = answer.get("schema") if "schema" in answer else _json(answer.get("content"))
                answers[code] = None if raw is None else _openapi_schema(raw, definitions)
            operations.append(Described(
                spec.get("operationId", f"{method.upper()} {path}"), method.upper(), path.removeprefix(below),
                parameters, body, body_required, answers, True, defs,
                requirements(spec.get("security", document.get("security", [])), schemes), media,
            ))
    return operations


# ---------------------------------------------------------------------------- GraphQL

GRAPHQL_REQUEST = ("query", "variables", "operationName", "extensions")
"""The fields of a GraphQL request posted as JSON (GraphQL over HTTP)."""
GRAPHQL_ANSWER = ("data", "errors", "extensions")
SCALARS: dict[str, tuple[type, ...]] = {"Int": (int,), "Float": (int, float), "String": (str,), "Boolean": (bool,),
                                        "ID": (str, int)}
"""The JSON values each built-in scalar is answered as (a bool is no number)."""


class GraphQL:
    """A GraphQL endpoint's schema (SDL) as a check of one exchange: the request's document
    parsed and validated against the schema (a field, argument or input field the schema
    lacks is named as graphql-core names it) and its variables coerced to their declared
    types; the answer's ``data`` held to what the document selects: a field it did not
    select (the schema's type lacking it, or a misspelling), a value of another scalar type
    or outside an enum, a null where the type is non-null, each named by its path; each of
    ``errors`` an object with a ``message``."""

    def __init__(self, sdl: str) -> None:
        import graphql

        self.schema = graphql.build_schema(sdl)

    def violations(self, method: str, body: Any, status: int, answer: Any) -> list[str]:
        import graphql

        if method != "POST":
            return [f"{method} is not described (a query is posted as JSON)"]
        if not isinstance(body, Mapping) or not isinstance(body.get("query"), str):
            return ["the request body is no object with a 'query'"]
        problems = [f"request field {k!r} is not described" for k in body if k not in GRAPHQL_REQUEST]
        try:
            document = graphql.parse(body["query"])
        except graphql.GraphQLError as exc:
            return [*problems, f"the query does not parse: {exc.message}"]
        found = graphql.validate(self.schema, document)
        problems += [f"query: {error.message}" for error in found]
        operation = graphql.get_operation_ast(document, body.get("operationName"))
        if not found and operation is not None:
            from graphql.execution.values import get_variable_values

            coerced = get_variable_values(self.schema, operation.variable_definitions or [],
                                          body.get("variables") or {})
            if isinstance(coerced, list):
                problems += [f"variables: {error.message}" for error in coerced]
                operation = None
        return problems + self._answer(document, operation if not found else None, status, answer)

    def _answer(self, document: Any, operation: Any, status: int, answer: Any) -> list[str]:
        import graphql

        if not isinstance(answer, Mapping):
            return [f"answer {status} is no JSON object"]
        problems = [f"answer {status} field {k!r} is not described" for k in answer if k not in GRAPHQL_ANSWER]
        errors = answer.get("errors")
        if errors is not None and (not isinstance(errors, list) or not all(
                isinstance(e, Mapping) and isinstance(e.get("message"), str) for e in errors)):
            problems.append(f"answer {status} field 'errors' is not a list of objects with a 'message'")
        if "data" not in answer and not errors:
            problems.append(f"answer {status} has neither 'data' nor 'errors'")
        if operation is None or answer.get("data") is None:
            return problems
        fragments = {d.name.value: d for d in document.definitions if isinstance(d, graphql.FragmentDefinitionNode)}
        root = self.schema.get_root_type(operation.operation)
        found: list[str] = []
        _selected(root, operation.selection_set, answer["data"], "data", fragments, found)
        return problems + [f"answer {status} {text}" for text in found]


def _selected(kind: Any, selection: Any, value: Any, where: str, fragments: Mapping[str, Any], found: list[str]) -> None:
    """Hold ``value`` (at ``where``) to the fields of object type ``kind`` that ``selection`` asks for."""
    import graphql

    if not isinstance(value, Mapping):
        found.append(f"field {where!r}: {value!r} is not an object ({kind.name})")
        return
    asked: dict[str, tuple[Any, Any]] = {}

    def collect(nodes: Any) -> None:
        for node in nodes.selections:
            if isinstance(node, graphql.FieldNode):
                name = node.name.value
                definition = graphql.TypeNameMetaFieldDef if name == "__typename" else kind.fields.get(name)
                asked[(node.alias or node.name).value] = (definition, node)
            elif isinstance(node, graphql.InlineFragmentNode):
                if node.type_condition is None or node.type_condition.name.value == kind.name:
                    collect(node.selection_set)
            elif isinstance(node, graphql.FragmentSpreadNode) and node.name.value in fragments:
                fragment = fragments[node.name.value]
                if fragment.type_condition.name.value == kind.name:
                    collect(fragment.selection_set)

    collect(selection)
    for key in value:
        if key not in asked:
            found.append(f"field {where + '.' + key!r} is not one the query selects ({kind.name} "
                         f"{'has it' if key in kind.fields else 'has no such field'})")
    for key, (definition, node) in asked.items():
        if key not in value:
            found.append(f"field {where + '.' + key!r} is missing (the query selects it)")
        elif definition is not None:
            _typed(definition.type, node.selection_set, value[key], f"{where}.{key}", fragments, found)


def _typed(kind: Any, selection: Any, value: Any, where: str, fragments: Mapping[str, Any], found: list[str]) -> None:
    """Hold ``value`` (at ``where``) to the output type ``kind``."""
    import graphql

    if graphql.is_non_null_type(kind):
        if value is None:
            found.append(f"field {where!r} is null; its type {kind} is not")
            return
        kind = kind.of_type
    if value is None:
        return
    if graphql.is_list_type(kind):
        if not isinstance(value, list):
            found.append(f"field {where!r}: {value!r} is not a list ({kind})")
            return
        for index, item in enumerate(value):
            _typed(kind.of_type, selection, item, f"{where}[{index}]", fragments, found)
    elif graphql.is_enum_type(kind):
        if value not in kind.values:
            found.append(f"field {where!r}: {value!r} is not one of {sorted(kind.values)}"[:MESSAGE_LENGTH])
    elif graphql.is_scalar_type(kind):
        accepted = SCALARS.get(kind.name)
        if accepted and (isinstance(value, bool) != (bool in accepted) or not isinstance(value, accepted)):
            found.append(f"field {where!r}: {value!r} is not a {kind.name}")
    elif graphql.is_object_type(kind) and selection is not None:
        _selected(kind, selection, value, where, fragments, found)


# ---------------------------------------------------------------------------- the pinned clouds

GOOGLE_TOKEN = ("Google's OAuth 2.0 token endpoint (RFC 6749 with RFC 7523's JWT grant): no discovery document "
                "describes it")


def _read(cloud: str, name: str) -> dict[str, Any]:
    return json.loads((DESCRIPTIONS / cloud / name).read_text())


def _gcp() -> Description:
    compute, common = discovery("compute", _read("gcp", "compute.v1.json"))
    billing, _ = discovery("cloudbilling", _read("gcp", "cloudbilling.v1.json"))
    return Description("gcp", [*compute, *billing], {"/oauth2/token": GOOGLE_TOKEN}, common)


def _docker() -> Description:
    return Description("docker", openapi(_read("docker", "engine.v1.41.json")))


def _digitalocean() -> Description:
    return Description("digitalocean", openapi(_read("digitalocean", "public.v2.json")))


def _vultr() -> Description:
    return Description("vultr", openapi(_read("vultr", "api.v2.json")))


def _lambda() -> Description:
    return Description("lambda", openapi(_read("lambda", "cloud.v1.json"), below="/api/v1"))


def _scaleway() -> Description:
    return Description("scaleway", openapi(_read("scaleway", "instance.v1.json")))


def _massedcompute() -> Description:
    return Description("massedcompute", openapi(_read("massedcompute", "vm.v1.json")))


def _jarvislabs() -> Description:
    return Description("jarvislabs", openapi(_read("jarvislabs", "sdk.v0.2.17.json")))


def _novita() -> Description:
    return Description("novita", openapi(_read("novita", "gpu-instance.v1.json")))


def _hyperstack() -> Description:
    return Description("hyperstack", openapi(_read("hyperstack", "infrahub.v1.json")))


def _verda() -> Description:
    """Verda publishes no OpenAPI document: its SDKs' models, transcribed (see its SOURCE.md)."""
    return Description("verda", openapi(_read("verda", "api.v1.json")))


def _runpod() -> Description:
    """Pods through the REST API v1 (OpenAPI); GPU types and prices through the GraphQL API
    (``/graphql``, beside ``/v1``), held to a schema derived from RunPod's docs and clients."""
    schema = GraphQL((DESCRIPTIONS / "runpod" / "graphql.graphql").read_text())
    # the key as RunPod's own client sends it to /graphql (runpod-python@07fc6e2:runpod/api/graphql.py)
    bearer = ((Credential("runpod", "header", "Authorization", "Bearer "),),)
    return Description("runpod", openapi(_read("runpod", "rest.v1.json")), graphql={"/graphql": schema},
                       graphql_security=bearer)


def _vastai() -> Description:
    """API v0 below the fake's prefix (``/api/v0``), and the v1 instance list as it is."""
    return Description("vastai", openapi(_read("vastai", "api.json"), below="/api/v0"), slash=True)


def _tensordock() -> Description:
    """TensorDock publishes no OpenAPI document: its v2 documentation pages, transcribed (see its SOURCE.md)."""
    return Description("tensordock", openapi(_read("tensordock", "api.v2.json")))


PINNED: dict[str, Callable[[], Description]] = {
    "gcp": _gcp, "docker": _docker, "digitalocean": _digitalocean, "vultr": _vultr, "lambda": _lambda,
    "scaleway": _scaleway, "massedcompute": _massedcompute, "jarvislabs": _jarvislabs, "novita": _novita,
    "hyperstack": _hyperstack, "verda": _verda, "runpod": _runpod, "vastai": _vastai, "tensordock": _tensordock,
}
"""The clouds whose description is pinned, each read from ``descriptions/<cloud>/``."""


@cache
def load(cloud: str) -> Description:
    """The pinned description of ``cloud`` (KeyError: none is pinned)."""
    return PINNED[cloud]()

