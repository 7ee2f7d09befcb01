"""The calls a ``MachineAPI``'s ``add_key``/``remove_key``/``keys`` make: for SSH keys
registered with a cloud account through a plain REST collection (``POST`` and ``GET`` on
one path, ``DELETE`` on ``path/{id}``), as several clouds keep them, with the cloud's own
field names (``KeyCollection``); or none at all, for a cloud whose orders carry the key
(``KeysInOrders``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skyward.providers.cloud import fields
from skyward.providers.cloud.api import Key
from skyward.providers.cloud.errors import CloudError
from skyward.providers.cloud.http import ApiClient


@dataclass(frozen=True, slots=True)
class KeyCollection:
    """Where a cloud keeps its SSH keys and what it calls their fields: ``items`` is the
    key of the list in a listing's answer (None: the answer is the list), ``created``
    the key of the new key in a creation's answer (None: the answer is the key itself)."""

    path: str
    id_field: str
    name_field: str
    key_field: str
    items: str | None = None
    created: str | None = None

    def add(self, http: ApiClient, name: str, public_key: str) -> str:
        """Register ``public_key`` as ``name``; its id (read back from the listing when
        the creation's answer does not hold it). CloudError when the cloud does not show it."""
        answer = http.call(
            "POST", self.path, f"adding SSH key {name}", json={self.name_field: name, self.key_field: public_key}
        )
        made = answer.get(self.created) if self.created and isinstance(answer, Mapping) else answer
        if isinstance(made, Mapping) and made.get(self.id_field) is not None:
            return fields.text(made, self.id_field)
        for key in self.listed(http):
            if key.name == name:
                return key.id
        raise CloudError(f"the {http.cloud} API did not list SSH key {name} after adding it; try again")

    def remove(self, http: ApiClient, key_id: str) -> None:
        """Delete the key (gone already is fine)."""
        http.remove(f"{self.path.rstrip('/')}/{key_id}", f"deleting SSH key {key_id}")

    def listed(self, http: ApiClient) -> list[Key]:
        """Every key of the account."""
        answer = http.call("GET", self.path, "listing SSH keys")
        found = answer.get(self.items) if self.items is not None and isinstance(answer, Mapping) else answer
        return [
            Key(fields.text(item, self.id_field), fields.text(item, self.name_field, ""))
            for item in (found if isinstance(found, list) else [])
            if isinstance(item, Mapping) and item.get(self.id_field) is not None
        ]


class KeysInOrders:
    """The key calls of a cloud that registers no SSH keys: each machine gets the public
    key from its order (``Order.public_key``), so there is no key id, nothing to remove
    and nothing to list."""

    def add_key(self, name: str, public_key: str) -> str | None:
        """None: the key travels in each order."""
        return None

    def remove_key(self, key_id: str) -> None:
        """Nothing is registered."""

    def keys(self) -> list[Key]:
        """Nothing is registered."""
        return []
