"""The ``sky`` command's help and its documentation: ``-h`` works on every command, help
shows no docstring markup, and docs/cli.md's table and the README name every command."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from skyward.cli.main import LAZY, SHORT_HELP, main

ROOT = Path(__file__).resolve().parents[2]


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))


def test_every_command_answers_dash_h_with_help_free_of_markup() -> None:
    runner = CliRunner()
    seen = [()] + [path for path, _ in commands(main)]
    assert len(seen) > 15
    for path in seen:
        shown = runner.invoke(main, [*path, "-h"], prog_name="sky")
        assert shown.exit_code == 0, (path, shown.output)
        assert "Usage: sky" in shown.output and "-h, --help" in shown.output, (path, shown.output)
        assert "``" not in shown.output, (path, shown.output)


def test_docs_cli_and_the_readme_name_every_command() -> None:
    table = (ROOT / "docs" / "cli.md").read_text().split("\n\n")
    rows = next(part for part in table if part.startswith("| command"))
    in_table = set(re.findall(r"^\| `sky ([a-z]+)", rows, flags=re.MULTILINE))
    readme = (ROOT / "README.md").read_text()
    line = re.search(r"docs/cli\.md\): the `sky` command \(([^)]*)\)", readme, flags=re.DOTALL)
    assert line is not None
    in_readme = set(re.findall(r"`([a-z]+)`", line.group(1)))
    top = {path[0] for path, _ in commands(main) if len(path) == 1}
    assert top - in_table == set(), "docs/cli.md's table leaves these out"
    assert top - in_readme == set(), "the README's list of commands leaves these out"


def test_sky_help_shows_each_lazy_commands_own_help_without_importing_it() -> None:
    for name, (_, _, line) in LAZY.items():
        command = main.get_command(click.Context(main), name)
        assert command is not None
        assert command.get_short_help_str(SHORT_HELP) == line, f"LAZY[{name!r}] differs from the command's own help"
    probe = (
        "import sys; from skyward.cli.main import main\n"
        "try:\n    main(['--help'], prog_name='sky')\nexcept SystemExit:\n    pass\n"
        "print(sorted({module for module, *_ in __import__('skyward.cli.main').cli.main.LAZY.values()} & set(sys.modules)))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert "Commands:" in shown.stdout and "ls " in shown.stdout
    assert shown.stdout.rstrip().endswith("[]"), shown.stdout


def test_a_mistyped_command_gets_the_nearest_lazy_ones_suggested() -> None:
    """In a fresh process, where no command's module is loaded yet (here, earlier tests loaded them)."""
    shown = subprocess.run([sys.executable, "-m", "skyward.cli.main", "lss"], capture_output=True, text=True,
                           timeout=60, check=False)
    assert shown.returncode == 2
    assert "No such command 'lss'" in shown.stderr and "'ls'" in shown.stderr, shown.stderr
