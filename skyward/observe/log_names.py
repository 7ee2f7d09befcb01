"""The names of skyward's loggers and its TRACE level, which the log file's lines carry
(``DATE TIME LEVEL LOGGER: MESSAGE``): what writes the log and what reads it back
(``sky logs``, ``log_export``) share them without importing the event machinery."""

TRACE = 5
"""A level below DEBUG for per-task detail."""
EVENTS_LOGGER = "skyward.events"
"""The logger of a pool's events."""
TASK_LOGGER = "skyward.task"
"""The logger of a task's output, as ``[node N] text``."""
