"""Turning ``Options.logging`` into a log file for the ``skyward`` logger, with the
pool's events and task output in it (see ``event_log``). Each pool's own events and
task output also go to ``pools/<pool id>.log`` beside that file, which ``sky logs``
follows."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from io import TextIOWrapper
from typing import cast

from skyward.core.paths import in_home, skyward_home
from skyward.core.private_dir import open_private, private_directories
from skyward.observe.bus import Subscribe
from skyward.observe.event_log import EventLog
from skyward.observe.log_names import EVENTS_LOGGER, TASK_LOGGER, TRACE
from skyward.observe.log_config import LogConfig

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
logging.addLevelName(TRACE, "TRACE")


class PoolLogging:
    """The handlers and event subscriptions one pool added; ``close()`` removes them."""

    def __init__(
        self, handlers: list[logging.Handler], event_log: EventLog | None, pool_file: str | None = None
    ) -> None:
        self.handlers = handlers
        self._event_log = event_log
        self.pool_file = pool_file
        """The file with only this pool's lines (None: no pool, or logging off)."""

    def close(self) -> None:
        """Detach and close the handlers, stop logging events."""
        if self._event_log is not None:
            self._event_log.close()
        logger = logging.getLogger("skyward")
        for handler in self.handlers:
            logger.removeHandler(handler)
            handler.close()


def install(setting: LogConfig | bool, subscribe: Subscribe | None = None, pool_id: str | None = None) -> PoolLogging:
    """Attach a rotating file handler (and, with ``LogConfig.console``, a stderr handler
    for skyward's own warnings) to the ``skyward`` logger; with ``subscribe``
    (``pool.on``), log the pool's events and task output to the file too, and with
    ``pool_id`` also to that pool's own file."""
    if setting is False:
        return PoolLogging([], None)
    config = setting if isinstance(setting, LogConfig) else LogConfig()
    path = str(in_home(config.file))
    directory = _log_directory(os.path.dirname(path) or ".")
    handler: logging.Handler
    if config.rotation_bytes is not None:
        handler = _PrivateRotatingFile(path, maxBytes=config.rotation_bytes, backupCount=config.retention, encoding="utf-8")
    else:
        unit, count = config.rotation_interval or ("D", 1)
        handler = _PrivateTimedRotatingFile(
            path, when=unit, interval=count, backupCount=config.retention, encoding="utf-8"
        )
    level = TRACE if config.level == "TRACE" else getattr(logging, config.level)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handlers: list[logging.Handler] = [handler]
    if config.console:
        stream = logging.StreamHandler(_CurrentStderr())
        stream.setLevel(max(level, logging.WARNING) if config.level != "DEBUG" else level)
        stream.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        stream.addFilter(_not_shown_by_console)
        handlers.append(stream)
    pool_file = None
    if subscribe is not None and pool_id is not None:
        pool_file = os.path.join(_log_directory(os.path.join(directory, "pools")), f"{pool_id}.log")
        own = _PrivateFile(pool_file, encoding="utf-8")
        own.setLevel(level)
        own.setFormatter(logging.Formatter(_FORMAT))
        own.addFilter(lambda record: getattr(record, "skyward_pool", None) == pool_id)
        handlers.append(own)
    logger = logging.getLogger("skyward")
    for item in handlers:
        logger.addHandler(item)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    event_log = EventLog(subscribe, level, pool_id) if subscribe is not None else None
    return PoolLogging(handlers, event_log, pool_file)


def _log_directory(directory: str) -> str:
    """``directory``, made when missing: private (``private_directory``) inside skyward's
    home, elsewhere new directories mode 0700 and existing ones as they are (a user's own
    choice). Returns it."""
    if os.path.abspath(directory).startswith(os.path.abspath(skyward_home()) + os.sep):
        private_directories(directory)
    else:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory


class _PrivateOpen:
    """A file handler whose file (and each rotated one) is mode 0600: logs hold every
    task's output."""

    baseFilename: str
    mode: str
    encoding: str | None
    errors: str | None

    def _open(self) -> TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in self.mode else os.O_TRUNC)
        descriptor = open_private(self.baseFilename, flags)
        return cast(TextIOWrapper, open(descriptor, self.mode, encoding=self.encoding, errors=self.errors))


class _PrivateFile(_PrivateOpen, logging.FileHandler):
    pass


class _PrivateRotatingFile(_PrivateOpen, logging.handlers.RotatingFileHandler):
    pass


class _PrivateTimedRotatingFile(_PrivateOpen, logging.handlers.TimedRotatingFileHandler):
    pass


def _not_shown_by_console(record: logging.LogRecord) -> bool:
    """Events and task output reach the terminal through the pool's console instead."""
    return not record.name.startswith((EVENTS_LOGGER, TASK_LOGGER))


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (a live console redirects it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
