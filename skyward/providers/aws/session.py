"""boto3 clients for one region, and AWS errors turned into ones that say the fix.

Credentials come from boto3's usual chain (environment, ``AWS_PROFILE`` and
``~/.aws``, SSO, instance roles) and are never logged. Endpoints follow boto3's own
settings too (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_EC2``, ...), which is how the
tests point it at a local emulator; an endpoint must be https, or http to this machine
only. Every call has a connect and a read timeout and a bounded retry budget.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, Protocol, overload

from skyward.core.errors import SkywardError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.urls import check_api_url

if TYPE_CHECKING:
    from boto3.session import Session

CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60
MAX_ATTEMPTS = 4
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded",
    "Unsupported", "UnfulfillableCapacity",
})
QUOTA_CODES = frozenset({"InstanceLimitExceeded", "VcpuLimitExceeded", "RequestLimitExceeded"})
_sessions: dict[str, Session] = {}
_lock = threading.Lock()


class ClientMeta(Protocol):
    @property
    def endpoint_url(self) -> str: ...


class Paginator(Protocol):
    def paginate(self, **params: object) -> Iterable[JsonObject]:
        """Every page of the operation's answer."""


class EC2(Protocol):
    """boto3's EC2 client (its operations are made at run time) as skyward calls it:
    each operation takes the API's parameters and answers its response as a dict (read
    it with ``cloud.fields``)."""

    @property
    def meta(self) -> ClientMeta: ...

    def get_paginator(self, operation: str) -> Paginator: ...

    def describe_availability_zones(self, **params: object) -> JsonObject: ...

    def describe_instances(self, **params: object) -> JsonObject: ...

    def run_instances(self, **params: object) -> JsonObject: ...

    def terminate_instances(self, **params: object) -> JsonObject: ...

    def create_tags(self, **params: object) -> JsonObject: ...

    def describe_images(self, **params: object) -> JsonObject: ...

    def describe_subnets(self, **params: object) -> JsonObject: ...

    def import_key_pair(self, **params: object) -> JsonObject: ...

    def describe_key_pairs(self, **params: object) -> JsonObject: ...

    def delete_key_pair(self, **params: object) -> JsonObject: ...

    def create_security_group(self, **params: object) -> JsonObject: ...

    def authorize_security_group_ingress(self, **params: object) -> JsonObject: ...

    def describe_security_groups(self, **params: object) -> JsonObject: ...

    def delete_security_group(self, **params: object) -> JsonObject: ...


class SSM(Protocol):
    """boto3's SSM client as skyward calls it (see ``EC2``)."""

    @property
    def meta(self) -> ClientMeta: ...

    def get_parameter(self, **params: object) -> JsonObject: ...


class Pricing(Protocol):
    """boto3's Price List client as skyward calls it (see ``EC2``)."""

    @property
    def meta(self) -> ClientMeta: ...

    def get_paginator(self, operation: str) -> Paginator: ...


class AWSError(SkywardError, RuntimeError):
    """An AWS call failed; the message says which call, why and the fix."""


class NoCapacityError(AWSError):
    """AWS has no capacity (or no quota) for this instance type and market right now."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@overload
def client(service: Literal["ec2"], region: str) -> EC2: ...


@overload
def client(service: Literal["ssm"], region: str) -> SSM: ...


@overload
def client(service: Literal["pricing"], region: str) -> Pricing: ...


def client(service: str, region: str) -> EC2 | SSM | Pricing:
    """A boto3 client for ``service`` in ``region`` (one session per region, shared).
    ValueError when its endpoint is plain http to another machine (see ``check_api_url``)."""
    import boto3
    from botocore.config import Config

    with _lock:
        session = _sessions.get(region)
        if session is None:
            session = _sessions[region] = boto3.session.Session(region_name=region)
    config = Config(
        connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"}, user_agent_extra="skyward",
    )
    made = session.client(service, config=config)
    check_api_url(_endpoint_setting(service), made.meta.endpoint_url, "AWS's signed requests and session token")
    return made


def _endpoint_setting(service: str) -> str:
    """The setting that gave ``service`` its endpoint: boto3 reads the per-service
    variable, then ``AWS_ENDPOINT_URL``, then ``endpoint_url`` in the AWS config file."""
    for variable in (f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}", "AWS_ENDPOINT_URL"):
        if os.environ.get(variable):
            return variable
    return "endpoint_url (AWS config file)"


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def explain(exc: BaseException, what: str, region: str) -> BaseException:
    """The error to raise for ``exc``, raised while ``what`` in ``region``."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return AWSError(
            f"AWS credentials were not found while {what}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE, or run `aws configure` / `aws sso login`"
        )
    if isinstance(exc, NoRegionError):
        return AWSError(f"no AWS region while {what}: pass sky.AWS(region=...)")
    if isinstance(exc, EndpointConnectionError):
        return AWSError(f"could not reach AWS in {region} while {what} ({exc}); check the network and the region name")
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", str(exc))
        if code in CAPACITY_CODES or code in QUOTA_CODES:
            hint = (
                "ask AWS for a higher quota (Service Quotas, EC2 'Running On-Demand/Spot instances' vCPUs) or use "
                "another instance type or region" if code in QUOTA_CODES else "try another region, instance type "
                "or allocation; AWS's spare capacity changes by the minute"
            )
            return NoCapacityError(f"AWS refused {what} in {region}: {code}: {message}. {hint}", code)
        if code in ("AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch"):
            return AWSError(
                f"AWS rejected the credentials while {what} ({code}: {message}); check the access key and secret, "
                "and that the IAM identity may use EC2 in this region"
            )
        return AWSError(f"AWS error while {what} in {region}: {code}: {message}")
    return exc
