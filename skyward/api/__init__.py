"""The public API: opening pools (Pool, Compute, Session), choosing among providers, config files.

The names users touch, here and in core/, image/ and model/, are re-exported from
``skyward`` (``import skyward as sky``)."""
