"""This skyward's version, read without ``importlib.metadata`` (whose import and lookup
cost a ``sky`` command tens of milliseconds); pyproject.toml's ``version`` is the same
string (tests/unit/test_version.py)."""

VERSION = "0.1.0"
