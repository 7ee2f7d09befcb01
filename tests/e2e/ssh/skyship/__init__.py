"""A package shipped to SSH nodes with Image(includes=[...]) in the SSH tests."""

SHIPPED = "shipped with includes"


def double(x: int) -> int:
    return 2 * x
