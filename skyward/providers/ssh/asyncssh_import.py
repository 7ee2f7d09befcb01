"""asyncssh, imported after a filter for the warnings its import raises under cryptography 51.

cryptography 51 deprecates DSA, and asyncssh's modules name its DSA types as they load:
five ``CryptographyDeprecationWarning``s (a ``UserWarning``, shown by default) on the
first SSH or cloud pool of a session, about no code of the user's. Only that warning is
filtered, and only where asyncssh's own modules raise it. Every skyward module that uses
asyncssh imports it from here.
"""

import warnings

warnings.filterwarnings("ignore", message="DSA is deprecated", module="asyncssh")

import asyncssh as asyncssh  # noqa: E402 - after the filter

__all__ = ["asyncssh"]
