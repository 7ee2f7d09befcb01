"""Errors of the machine clouds; each message names the cloud, what was being done, why,
and the fix."""

from __future__ import annotations

from skyward.core.errors import SkywardError


class CloudError(SkywardError, RuntimeError):
    """A cloud API call failed."""


class CredentialsError(CloudError):
    """The cloud's credentials are missing or were refused; the message names where they
    are looked for."""


class CapacityError(CloudError):
    """The cloud has no machine of this kind (or market) for us right now; the launch
    tries the next offer, then the pool the next Spec."""


class CloudAPIError(CloudError):
    """The cloud answered a call with an error (``status`` and its parsed ``body``)."""

    def __init__(self, message: str, status: int, body: object) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class CloudAnswerError(CloudError, ValueError):
    """The cloud answered a call in a shape skyward does not read (a field missing, or of
    another type); the message names the field and the value."""
