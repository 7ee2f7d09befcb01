"""docs/security.md's claims table names, for every claim, the test that fails when it
breaks: each named test must exist (a file under tests/ and a test function in it), and
every row must name one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (\d+) \| (.+) \| (.+) \|$")
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def claims() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "security.md").read_text()
    table = text.split("## Claims and their tests", 1)[1].split("\n## ", 1)[0]
    return [match.groups() for line in table.splitlines() if (match := ROW.match(line))]  # type: ignore[misc]


def test_the_table_has_its_claims_numbered_in_order() -> None:
    rows = claims()
    assert len(rows) >= 30
    assert [int(number) for number, _, _ in rows] == list(range(1, len(rows) + 1))


def test_every_claim_names_a_test_that_exists() -> None:
    missing = []
    for number, claim, tests in claims():
        references = REFERENCE.findall(tests)
        if not references:
            missing.append(f"row {number} ({claim[:40]}...) names no test")
        for path, name in references:
            source = ROOT / path
            defined = source.is_file() and any(
                isinstance(node, ast.FunctionDef) and node.name == name for node in ast.walk(ast.parse(source.read_text()))
            )
            if not defined:
                missing.append(f"row {number}: {path}::{name} does not exist")
    assert missing == []
