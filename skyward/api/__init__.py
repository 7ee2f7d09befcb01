"""The public API: defining work, opening pools, specs and options, what a task sees, errors.

Everything here is re-exported from ``skyward`` (``import skyward as sky``)."""
