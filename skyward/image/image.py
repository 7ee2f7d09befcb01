"""The environment on each node: ``Image`` (Python, packages, env vars, shipped code) and
``PipIndex``. Frozen dataclasses that validate on construction; ``Image.bootstrap`` renders
the script that prepares a node (``skyward.image.script``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from skyward.core.validation import as_str_tuple, as_tuple, check_choice, check_number, check_str_dict, fail
from skyward.image.script import Artifacts, render
from skyward.observe.metrics import Collector, Default
from skyward.observe.metrics import normalize as normalize_metrics

SKYWARD_SOURCES = ("auto", "local", "github", "pypi")


@dataclass(frozen=True, slots=True)
class PipIndex:
    """A package index used only for the listed packages."""

    url: str
    packages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or "://" not in self.url:
            raise fail("PipIndex", "url", self.url, "give the index URL, e.g. https://host/simple")
        object.__setattr__(self, "packages", as_str_tuple("PipIndex", "packages", self.packages))


def local_python() -> str:
    """This interpreter's ``major.minor``."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True, slots=True)
class Image:
    """The environment on each node: Python version, packages, env vars, shipped code."""

    python: str = "auto"
    pip: tuple[str, ...] = ()
    pip_indexes: tuple[PipIndex, ...] = ()
    apt: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    shell_vars: dict[str, str] = field(default_factory=dict)
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    skyward_source: str = "auto"
    metrics: Default | Collector | Sequence[Collector | Default] | None = Default()
    """What each node samples: ``Default()``, one ``sky.metrics`` collector, several (a list
    becomes a tuple), or None for nothing."""
    bootstrap_timeout: int = 300
    pip_extra_index_url: str | None = None
    """The older reference's extra index for every package: becomes a ``PipIndex`` with
    no packages in ``pip_indexes``."""

    def __post_init__(self) -> None:
        if not isinstance(self.python, str) or not (
            self.python == "auto" or _is_minor_version(self.python)
        ):
            raise fail("Image", "python", self.python, 'use "auto" or a version like "3.11"')
        for name in ("pip", "apt", "includes", "excludes"):
            object.__setattr__(self, name, as_str_tuple("Image", name, getattr(self, name)))
        indexes = as_tuple("Image", "pip_indexes", self.pip_indexes, "[sky.PipIndex(url=..., packages=[...])]")
        for index in indexes:
            if not isinstance(index, PipIndex):
                raise fail("Image", "pip_indexes", index, "use sky.PipIndex(url=..., packages=[...])")
        if self.pip_extra_index_url is not None:
            if not isinstance(self.pip_extra_index_url, str) or "://" not in self.pip_extra_index_url:
                raise fail("Image", "pip_extra_index_url", self.pip_extra_index_url, "give the index URL, e.g. https://host/simple")
            if not any(index.url == self.pip_extra_index_url for index in indexes):
                indexes += (PipIndex(self.pip_extra_index_url),)
        object.__setattr__(self, "pip_indexes", indexes)
        object.__setattr__(self, "env", check_str_dict("Image", "env", self.env))
        object.__setattr__(self, "shell_vars", check_str_dict("Image", "shell_vars", self.shell_vars))
        check_choice("Image", "skyward_source", self.skyward_source, SKYWARD_SOURCES)
        object.__setattr__(self, "metrics", normalize_metrics(self.metrics))
        check_number("Image", "bootstrap_timeout", self.bootstrap_timeout, strictly_positive=True, finite=True)

    @property
    def python_version(self) -> str:
        """The concrete ``major.minor`` ("auto" resolves to this interpreter's)."""
        return local_python() if self.python == "auto" else self.python

    def content_hash(self) -> str:
        """12 hex digits that change whenever what a node installs or sets for this Image
        changes (Python, packages, indexes, apt, env, shell_vars, includes, excludes)."""
        import hashlib
        import json

        content = {
            "python": self.python_version, "pip": self.pip, "apt": sorted(self.apt), "env": sorted(self.env.items()),
            "indexes": [(index.url, index.packages) for index in self.pip_indexes],
            "shell_vars": sorted(self.shell_vars.items()), "includes": self.includes, "excludes": self.excludes,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    def bootstrap(self, ttl: int = 0) -> str:
        """The idempotent bash script that prepares a node for this Image (as pools run
        it; ``skyward.whl`` stands for the wheel a pool ships). With ``ttl`` seconds the
        machine also schedules its own shutdown that far ahead (its dead-man switch)."""
        import math

        check_number("Image.bootstrap", "ttl", ttl, minimum=0, integer=True)
        script = render(self, Artifacts("skyward.whl", self.content_hash(), None, ""), "/tmp/skyward-bootstrap",
                        self.bootstrap_timeout)
        if ttl:
            halt = f"shutdown -h +{max(1, math.ceil(ttl / 60))} 'skyward: ttl' || true\n"
            script = script.replace("\n", "\n" + halt, 1)
        return script


def _is_minor_version(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


DEFAULT_IMAGE = Image()
"""The image a pool uses when its Spec names none (``sky.DEFAULT_IMAGE``)."""
