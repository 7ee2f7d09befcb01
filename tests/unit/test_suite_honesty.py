"""The suite tells the truth about itself: every test function asserts something (itself,
or through a helper of the suite that does); under ``CI=true`` a skip whose reason is
not on the short list in tests/conftest.py (``CI_SKIPS``) fails the run, and so does
scripts/system_deps.sh without root; the passes on other providers (``--provider ...``)
run no test that opens a local pool of its own."""

from __future__ import annotations

import ast
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CHECKS = {"raises", "fail", "warns", "deprecated_call"}
"""Calls that assert: ``pytest.raises`` and its kin."""


def _asserts_directly(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call) and _called(node) in CHECKS:
            return True
    return False


def _called(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def not_asserting(root: Path = TESTS) -> list[str]:
    """The test functions (``tests/**/test_*.py``) with no assertion of their own and no
    call of a function of the suite that asserts, directly or through others (by name)."""
    functions: dict[str, list[tuple[bool, set[str]]]] = {}
    tests: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = {_called(call) for call in ast.walk(node) if isinstance(call, ast.Call)}
                functions.setdefault(node.name, []).append((_asserts_directly(node), calls))
                if node.name.startswith("test_") and path.name.startswith("test_"):
                    tests.append((str(path.relative_to(root.parent)), node.name))
    asserting = {name for name, bodies in functions.items() if any(direct for direct, _ in bodies)}
    grown = True
    while grown:
        grown = False
        for name, bodies in functions.items():
            if name not in asserting and any(calls & asserting for _, calls in bodies):
                asserting.add(name)
                grown = True
    return [f"{path}::{name}" for path, name in tests if name not in asserting]


def test_every_test_function_asserts_something() -> None:
    assert not_asserting() == []


def test_a_test_without_an_assertion_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "tests"
    planted.mkdir()
    (planted / "test_planted.py").write_text(
        "def test_nothing_checked():\n    sum([1, 2])\n\ndef test_checked_by_a_helper():\n    helper()\n\n"
        "def helper():\n    assert sum([1, 2]) == 3\n", encoding="utf-8",
    )
    assert not_asserting(planted) == ["tests/test_planted.py::test_nothing_checked"]


def _run_planted(tmp_path: Path, body: str, ci: bool) -> subprocess.CompletedProcess[str]:
    """``body`` as a test file run by pytest in ``tmp_path``, with the suite's skip hook
    (not inside tests/, where the suite's other runs would collect it)."""
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(TESTS / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "pytest_runtest_makereport = suite.pytest_runtest_makereport\n",
        encoding="utf-8",
    )
    (tmp_path / "test_planted.py").write_text(body, encoding="utf-8")
    env = {**os.environ, "CI": "true" if ci else "false"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_planted.py"], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )


SKIPS = """
import pytest

def test_skipped_for_a_reason_of_its_own():
    pytest.skip("sshd is not installed")

def test_skipped_for_an_allowed_reason():
    pytest.skip("no NVIDIA GPU with NVML (nvidia-ml-py) on this machine")
"""


def test_under_ci_a_skip_not_on_the_list_fails_naming_its_reason(tmp_path: Path) -> None:
    done = _run_planted(tmp_path, SKIPS, ci=True)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed, 1 skipped" in done.stdout
    assert "skipped under CI=true: Skipped: sshd is not installed" in done.stdout


def test_outside_ci_both_skip_and_say_why(tmp_path: Path) -> None:
    done = _run_planted(tmp_path, SKIPS, ci=False)
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout[-2000:]
    assert "SKIPPED [1]" in done.stdout and "sshd is not installed" in done.stdout


SHARED = "pool4"
"""The shared pool: the alternate-provider passes (``--provider ...``) run only the tests
that use it (tests/conftest.py ``_uses_pool4``)."""
OPENERS = {"Compute", "ComputePool"}
"""Calls that open a pool (as ``sky.X(...)`` or ``X(...)``); ``sky.pool(...)`` too."""
LOCAL_POOLS_ALLOWED = {
    "tests/e2e/test_dispatch.py::test_sky_module_targets_the_active_pool": (
        "opens a 1-node local pool inside the pass's pool4 on purpose: `>> sky` must reach the innermost open "
        "pool, not pool4, whichever provider pool4 is on (the pids it compares come from both)"
    ),
}
"""Tests a pass selects that may still open a local pool of their own (test -> why)."""


def _is_fixture(function: ast.AST) -> bool:
    return any("fixture" in ast.unparse(decorator) for decorator in getattr(function, "decorator_list", ()))


def _usefixtures(node: ast.AST) -> set[str]:
    """The names given to ``pytest.mark.usefixtures(...)`` calls within ``node``."""
    return {
        argument.value
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and _called(call) == "usefixtures"
        for argument in call.args
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str)
    }


def _requested(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The fixtures a test or fixture asks for: its parameters and ``usefixtures`` marks."""
    names = {argument.arg for argument in function.args.args + function.args.kwonlyargs}
    for decorator in function.decorator_list:
        names |= _usefixtures(decorator)
    return names - {"self", "request"}


def _thread_pool(function: ast.AST) -> bool:
    """test_collections' ``pool`` fixture, whose "thread" side is pool4 (``_uses_pool4``)."""
    return getattr(function, "name", "") == "pool" and any(
        isinstance(node, ast.keyword) and node.arg == "params" and "'thread'" in ast.unparse(node.value)
        for decorator in function.decorator_list for node in ast.walk(decorator)
    )


def _opens_local_pool(call: ast.Call) -> bool:
    """A call that opens a pool on this machine: ``Compute``/``ComputePool``/``sky.pool``
    with no ``provider=`` anywhere in its arguments (or ``provider=...Local()``), no
    ``*``/``**`` arguments and no positional argument other than a call (a ``Spec(...)``)."""
    function = call.func
    named = _called(call)
    is_sky_pool = isinstance(function, ast.Attribute) and named == "pool" and ast.unparse(function.value) == "sky"
    if named not in OPENERS and not is_sky_pool:
        return False
    if any(keyword.arg is None for keyword in call.keywords):
        return False
    if any(not isinstance(argument, ast.Call) for argument in call.args):
        return False
    if [keyword.arg for keyword in call.keywords] == ["name"]:
        return False  # a kept pool by name: wherever it was defined
    providers = [node for node in ast.walk(call) if isinstance(node, ast.keyword) and node.arg == "provider"]
    return all(isinstance(node.value, ast.Call) and _called(node.value) == "Local" for node in providers)


def _opens_here(function: ast.AST) -> bool:
    return any(isinstance(node, ast.Call) and _opens_local_pool(node) for node in ast.walk(function))


class _Module:
    """One test module's functions, with the fixtures its conftest.py files define."""

    def __init__(self, path: Path, root: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self.functions = {
            node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.fixtures: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for folder in reversed(path.relative_to(root).parents):
            conftest = root / folder / "conftest.py"
            if conftest.exists():
                self.fixtures.update(_Module._fixtures_of(ast.parse(conftest.read_text(encoding="utf-8"))))
        self.fixtures.update(_Module._fixtures_of(tree))
        self.marked = set().union(*(
            _usefixtures(node) for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(name, "id", "") == "pytestmark" for name in node.targets)
        ))

    @staticmethod
    def _fixtures_of(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        return {
            node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_fixture(node)
        }

    def fixture_closure(self, test: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        """Every fixture the test gets, through the fixtures that ask for others."""
        seen: set[str] = set()
        pending = list(_requested(test) | self.marked)
        while pending:
            name = pending.pop()
            if name not in seen:
                seen.add(name)
                if name in self.fixtures:
                    pending.extend(_requested(self.fixtures[name]))
        return seen

    def shared(self, fixtures: set[str]) -> bool:
        """Whether a pass on another provider selects a test with these fixtures."""
        return SHARED in fixtures or any(_thread_pool(self.fixtures[name]) for name in fixtures & set(self.fixtures))

    def opens_local_pool(self, test: ast.FunctionDef | ast.AsyncFunctionDef, fixtures: set[str]) -> bool:
        """The test, the module's functions it calls (by name, transitively) or its fixtures
        other than the shared pool open a local pool."""
        bodies: list[ast.AST] = [self.fixtures[name] for name in fixtures - {SHARED} if name in self.fixtures]
        pending, seen = [test], {test.name}
        while pending:
            function = pending.pop()
            bodies.append(function)
            for call in ast.walk(function):
                name = _called(call) if isinstance(call, ast.Call) else ""
                if name in self.functions and name not in seen:
                    seen.add(name)
                    pending.append(self.functions[name])
        return any(_opens_here(body) for body in bodies)


def local_pools_in_shared_passes(root: Path = TESTS) -> list[str]:
    """The tests (``tests/**/test_*.py``) that the alternate-provider passes select (they use
    pool4) but that open a local pool of their own, so those passes run them again locally."""
    found: list[str] = []
    for path in sorted(root.rglob("test_*.py")):
        module = _Module(path, root)
        for test in module.functions.values():
            if test.name.startswith("test_"):
                fixtures = module.fixture_closure(test)
                if module.shared(fixtures) and module.opens_local_pool(test, fixtures):
                    found.append(f"{path.relative_to(root.parent)}::{test.name}")
    return found


def test_the_alternate_provider_passes_run_no_local_pools() -> None:
    """scripts/test.sh: the passes on other providers run only the tests of pool4, the rest once."""
    found = local_pools_in_shared_passes()
    offenders = [test for test in found if test not in LOCAL_POOLS_ALLOWED]
    assert offenders == [], (
        f"selected by every --provider pass (they use pool4) but open a local pool too: {offenders}; use the "
        "warm_ray fixture instead of pool4, or open the pool on the pass's provider"
    )
    assert set(LOCAL_POOLS_ALLOWED) <= set(found), "an allowed test no longer opens a local pool: drop it from the list"


PASSES = '''
import pytest
import skyward as sky

@pytest.fixture
def shared(pool4):
    return pool4

@pytest.fixture(params=["thread", "process"])
def pool(request):
    return request.getfixturevalue("pool4" if request.param == "thread" else "process_pool")

def _open():
    return sky.Compute(nodes=1)

def test_own_pool(pool4):
    with sky.Compute(nodes=1) as own:
        assert own is not pool4

def test_through_a_fixture(shared):
    with sky.Compute(sky.Spec(nodes=2)):
        assert shared

def test_through_a_helper(pool):
    with _open():
        assert pool

def test_named_local(pool4):
    with sky.Compute(provider=sky.Local()):
        assert pool4

def test_on_another_provider(pool4):
    with sky.Compute(provider=sky.SSH(hosts=["h"])):
        assert pool4

def test_warm_ray_only(warm_ray):
    with sky.Compute(nodes=1) as own:
        assert own
'''


def test_a_local_pool_in_a_pool4_test_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "tests"
    planted.mkdir()
    (planted / "test_planted.py").write_text(PASSES, encoding="utf-8")
    (planted / "test_marked.py").write_text(
        "import pytest\nimport skyward as sky\npytestmark = pytest.mark.usefixtures('pool4')\n\n"
        "def test_marked():\n    assert sky.pool(nodes=1)\n", encoding="utf-8",
    )
    assert local_pools_in_shared_passes(planted) == [
        "tests/test_marked.py::test_marked",
        *(f"tests/test_planted.py::{name}" for name in
          ("test_own_pool", "test_through_a_fixture", "test_through_a_helper", "test_named_local")),
    ]


NEEDS_ROOT = "the suite needs root in CI"
"""What scripts/system_deps.sh says, under ``CI=true``, to an account that is not root."""


def _system_deps_unprivileged(ci: bool) -> subprocess.CompletedProcess[str]:
    """scripts/system_deps.sh run as an account other than root (``nobody`` through
    ``setpriv`` when this is root), its text on stdin, so no path need be readable to it."""
    command = ["bash", "-s"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is not installed: cannot run system_deps.sh as another account")
        try:
            pwd.getpwuid(65534)
        except KeyError:
            pytest.skip("no account with uid 65534 (nobody) to run system_deps.sh as")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", "CI": "true" if ci else "false"}
    with open(TESTS.parent / "scripts" / "system_deps.sh", encoding="utf-8") as script:
        return subprocess.run(command, stdin=script, cwd="/", env=env, capture_output=True, text=True, timeout=60,
                              check=False)


def test_system_deps_fails_in_ci_without_root() -> None:
    """Under CI=true, no root is an error before anything is looked for or installed."""
    done = _system_deps_unprivileged(ci=True)
    assert done.returncode != 0, done.stdout + done.stderr
    assert NEEDS_ROOT in done.stderr and done.stdout == "", done.stderr


def test_system_deps_outside_ci_without_root_only_notes() -> None:
    """The same account outside CI: no error (what is missing is a note, those tests skip)."""
    done = _system_deps_unprivileged(ci=False)
    assert done.returncode == 0 and NEEDS_ROOT not in done.stderr, done.stderr
