"""Turning ``Options.logging`` into a log file for the ``skyward`` logger."""

from __future__ import annotations

import logging
import logging.handlers
import os

from skyward.observe.log_config import LogConfig

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TRACE = 5
logging.addLevelName(TRACE, "TRACE")


def install(setting: LogConfig | bool) -> list[logging.Handler]:
    """Attach a rotating file handler (and, with ``console``, a stderr handler) to the
    ``skyward`` logger; returns them so the pool can remove them at exit."""
    if setting is False:
        return []
    config = setting if isinstance(setting, LogConfig) else LogConfig()
    path = os.path.expanduser(config.file)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    handler: logging.Handler
    if config.rotation_bytes is not None:
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=config.rotation_bytes, backupCount=config.retention, encoding="utf-8"
        )
    else:
        unit, count = config.rotation_interval or ("D", 1)
        handler = logging.handlers.TimedRotatingFileHandler(
            path, when=unit, interval=count, backupCount=config.retention, encoding="utf-8"
        )
    level = TRACE if config.level == "TRACE" else getattr(logging, config.level)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handlers = [handler]
    if config.console:
        stream = logging.StreamHandler()
        stream.setLevel(max(level, logging.WARNING) if config.level != "DEBUG" else level)
        stream.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        handlers.append(stream)
    logger = logging.getLogger("skyward")
    for item in handlers:
        logger.addHandler(item)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    return handlers


def uninstall(handlers: list[logging.Handler]) -> None:
    """Detach and close the handlers from ``install``."""
    logger = logging.getLogger("skyward")
    for handler in handlers:
        logger.removeHandler(handler)
        handler.close()
