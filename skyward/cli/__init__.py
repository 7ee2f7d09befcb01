"""The ``sky`` command."""
