"""``LogConfig``: where skyward writes its own log and task output."""

from __future__ import annotations

import re
from dataclasses import dataclass

from skyward.core.validation import check_choice, check_number, fail

LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)\s*$", re.IGNORECASE)
_TIME = re.compile(r"^\s*(\d+)\s*(minute|hour|day|week)s?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Log file settings; rotation is a size ("50 MB") or an interval ("1 day")."""

    level: str = "INFO"
    file: str = "~/.skyward/logs/skyward.log"
    console: bool = True
    rotation: str = "50 MB"
    retention: int = 10

    def __post_init__(self) -> None:
        check_choice("LogConfig", "level", self.level, LEVELS)
        if not isinstance(self.file, str) or not self.file:
            raise fail("LogConfig", "file", self.file, "give a file path")
        if not isinstance(self.console, bool):
            raise fail("LogConfig", "console", self.console, "use True or False")
        if not isinstance(self.rotation, str) or not (_SIZE.match(self.rotation) or _TIME.match(self.rotation)):
            raise fail("LogConfig", "rotation", self.rotation, 'use a size like "50 MB" or a time like "1 day"')
        check_number("LogConfig", "retention", self.retention, minimum=1, integer=True)

    @property
    def rotation_bytes(self) -> int | None:
        """Rotation size in bytes, or None when rotation is by time."""
        match = _SIZE.match(self.rotation)
        if not match:
            return None
        scale = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}[match.group(2).upper()]
        return int(float(match.group(1)) * scale)

    @property
    def rotation_interval(self) -> tuple[str, int] | None:
        """(unit, count) for time-based rotation, in TimedRotatingFileHandler's units."""
        match = _TIME.match(self.rotation)
        if not match:
            return None
        unit = {"minute": "M", "hour": "H", "day": "D", "week": "W0"}[match.group(2).lower()]
        count = int(match.group(1))
        return ("D", count * 7) if unit == "W0" else (unit, count)
