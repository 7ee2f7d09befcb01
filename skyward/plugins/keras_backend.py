"""``sky.plugins.keras``: Keras 3 on every node with the backend chosen (``KERAS_BACKEND``).

At open the plugin adds keras and the backend's package to the Image (a local pool adds
only what this environment lacks) and sets ``KERAS_BACKEND`` in the nodes' environment,
which Keras reads when it is first imported. Distributing the training itself is the
backend's business (combine it with ``sky.plugins.jax()`` or ``sky.plugins.torch()``).
"""

from __future__ import annotations

from dataclasses import replace

from skyward.core.validation import check_choice
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.plugins.packages import with_packages

BACKENDS = {"jax": "jax", "torch": "torch", "tensorflow": "tensorflow"}


def keras(*, backend: str = "jax") -> Plugin:
    """Keras with ``backend`` ("jax", "torch" or "tensorflow") on every node."""
    check_choice("plugins.keras", "backend", backend, tuple(BACKENDS))

    def transform(image: Image, cluster: Cluster) -> Image:
        image = with_packages(image, cluster, ["keras", BACKENDS[backend]])
        return replace(image, env={**image.env, "KERAS_BACKEND": backend})

    return Plugin.create("keras").with_image_transform(transform)
