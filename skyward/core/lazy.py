"""Names a package imports only on first use (a module ``__getattr__``), so importing the
package does not import the modules behind them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

from skyward.core.frames import INTERRUPTED, full


def lazy_names(namespace: MutableMapping[str, object], modules: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of the module whose globals are ``namespace``: ``name`` is
    imported on first use from where ``modules[name]`` says, and kept in ``namespace``
    (later uses do not come here): "module" (its attribute ``name``), "module:attribute"
    (another attribute) or "module:" (the module itself). AttributeError for a name
    ``modules`` does not hold; a Ctrl-C during the import is one ``INTERRUPTED`` line
    (``SKYWARD_TRACEBACK=full``: with the import's frames)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        if name not in modules:
            raise AttributeError(f"module '{package}' has no attribute {name!r}")
        module, colon, attribute = modules[name].partition(":")
        try:
            found = importlib.import_module(module)
        except KeyboardInterrupt:  # Ctrl-C during a name's first import: said as a public call says it
            if full():
                raise
            raise KeyboardInterrupt(INTERRUPTED) from None
        value = getattr(found, attribute or name) if not colon or attribute else found
        namespace[name] = value
        return value

    return __getattr__
