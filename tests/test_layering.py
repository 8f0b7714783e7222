"""Every module imports, and the dependency direction holds: states does no I/O, adapters never
reach into the journal or the engine, and the journal never reaches into adapters or engine.
The imports read here are every import the code makes, at module level and inside functions
alike: no import cycle among modules, nothing importing a layer above its own, and few imports
inside functions."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import vibesys

PACKAGE = Path(vibesys.__file__).parent
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages([str(PACKAGE)], prefix="vibesys.")
    if not m.name.endswith(("local_wrapper", "__main__"))
)

#: package -> prefixes its modules must never import
FORBIDDEN = {
    "vibesys.states": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.adapters",
        "vibesys.cli",
        "vibesys.config",
        "sqlite3",
        "sqlite_utils",
        "subprocess",
        "socket",
        "paramiko",
        "pydantic",
        "time",
        "datetime",
        "os",
        "io",
        "pathlib",
        "random",
    ),
    "vibesys.journal_schema": (
        "vibesys.engine",
        "vibesys.adapters",
        "vibesys.cli",
        "vibesys.bridge",
    ),
    "vibesys.adapters": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
        "vibesys.broker",
        "vibesys.bridge",
    ),
    "vibesys.config": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
        "vibesys.adapters",
        "vibesys.broker",
    ),
    "vibesys.engine": ("vibesys.cli", "vibesys.broker", "vibesys.bridge"),
    # A site check reaches the site through config and adapters and records nothing (it runs
    # the broker's sandbox, `osutil.sandbox`, on a node).
    "vibesys.sitecheck": (
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
        "vibesys.broker",
        "vibesys.bridge",
    ),
    # The candidate snapshot is computed before any adapter exists: pure and local.
    "vibesys.snapshot": (
        "vibesys.adapters",
        "vibesys.config",
        "vibesys.journal_schema",
        "vibesys.engine",
        "vibesys.states",
        "vibesys.cli",
        "subprocess",
        "socket",
        "paramiko",
    ),
    # The planner decides from data alone: no clock, no I/O, no adapter.
    "vibesys.engine.plan": (
        "vibesys.adapters",
        "vibesys.engine.core",
        "vibesys.engine.execute",
        "sqlite3",
        "subprocess",
        "socket",
        "os",
        "time",
        "pathlib",
        "random",
    ),
    "vibesys.engine.seen": ("vibesys.adapters", "sqlite3", "subprocess", "os", "time"),
    # The web view only reads the journal: no engine, no adapter, nothing that writes.
    "vibesys.ui": (
        "vibesys.engine",
        "vibesys.adapters",
        "vibesys.broker",
        "vibesys.cli",
        "sqlite_utils",
        "subprocess",
    ),
    # Below the CLI: they serve it (and each other), never the other way round.
    "vibesys.broker": ("vibesys.cli",),
    "vibesys.bridge": ("vibesys.cli",),
    # The socket-service layer sits under both services: nothing of theirs, nor of the engine.
    "vibesys.service": (
        "vibesys.bridge",
        "vibesys.broker",
        "vibesys.cli",
        "vibesys.engine",
        "vibesys.journal_schema",
        "vibesys.adapters",
        "vibesys.config",
    ),
    "vibesys.job_result": ("vibesys.cli", "vibesys.engine", "vibesys.adapters"),
    # The Python API sits beside the CLI, over the engine: the CLI may be built on it, never
    # the other way round; the bridge and the broker are other hosts of the engine.
    "vibesys.client": ("vibesys.cli", "vibesys.bridge", "vibesys.broker", "vibesys.ui"),
    # The OS helpers are leaves: nothing of vibesys (the typed errors excepted).
    "vibesys.osutil": (
        "vibesys.adapters",
        "vibesys.bridge",
        "vibesys.broker",
        "vibesys.cli",
        "vibesys.config",
        "vibesys.engine",
        "vibesys.job_result",
        "vibesys.journal_schema",
        "vibesys.states",
        "vibesys.ui",
    ),
    # The error tree and its boundary sit under everything: they import nothing of vibesys.
    "vibesys.errors": ("vibesys",),
}

#: The most modules that may lie loose at the top of `vibesys/` (packages hold the rest).
TOP_MODULES = 6
#: The house's limit on a module's length.
MODULE_LINES = 400

#: The broker's own rules: module -> the only vibesys packages (and I/O modules) it may import.
#: The protocol is pure; the server reaches the engine only through `engine_runner`.
_BROKER_CORE = (
    "vibesys.broker",
    "vibesys.osutil.sandbox",
    "vibesys.config",
    "vibesys.errors",
    "vibesys.service",
)
BROKER_ALLOWED = {
    "vibesys.broker.protocol": (
        "vibesys.broker.replies",
        "vibesys.service.framing",
        "vibesys.service.tokens",
    ),
    "vibesys.broker.replies": ("vibesys.service.framing",),
    "vibesys.broker.jobs": ("vibesys.osutil.sandbox",),
    "vibesys.broker.environment": (),
    "vibesys.broker.slots": ("vibesys.broker.jobs", "vibesys.broker.replies"),
    # The run-wide cap's line lives in the journal; it never drives an invocation itself.
    "vibesys.broker.run_slots": ("vibesys.broker", "vibesys.journal_schema"),
    "vibesys.broker.admission": _BROKER_CORE,
    "vibesys.broker.server": _BROKER_CORE,
    "vibesys.broker.client": (),
}
#: I/O the pure broker modules must not use.
BROKER_PURE = (
    "vibesys.broker.protocol",
    "vibesys.broker.replies",
    "vibesys.broker.jobs",
    "vibesys.broker.environment",
)
IO_MODULES = ("socket", "subprocess", "os", "io", "pathlib", "threading", "time", "sqlite3")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)


#: package -> modules it may import although FORBIDDEN bans their prefix.
ALLOWED_ACROSS: dict[str, tuple[str, ...]] = {}


def violations(module: str, imports: set[str]) -> list[str]:
    """What `module` may not import of `imports`, by the rules above (prefix matches)."""
    problems = []
    for package, banned in FORBIDDEN.items():
        if module == package or module.startswith(package + "."):
            allowed = ALLOWED_ACROSS.get(package, ())
            for imported in sorted(imports):
                if imported in allowed:
                    continue
                if any(imported == b or imported.startswith(b + ".") for b in banned):
                    problems.append(f"{module} imports {imported}")
    return problems


def test_layers() -> None:
    problems = []
    for path in PACKAGE.rglob("*.py"):
        module = "vibesys." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        problems += violations(module.removesuffix(".__init__"), imports_of(path))
    assert problems == []


def test_every_cli_module_is_banned_below_the_cli() -> None:
    """The CLI is one package, so the prefix catches each of its modules (the renderings,
    `run`'s body) in every layer below it."""
    below = ("engine", "adapters", "journal_schema", "states", "config", "broker", "bridge")
    below += ("ui", "sitecheck", "snapshot", "osutil", "job_result", "errors")
    cli = sorted("vibesys.cli." + p.stem for p in (PACKAGE / "cli").glob("*.py"))
    assert "vibesys.cli.render" in cli and "vibesys.cli.run_command" in cli
    for layer in below:
        for module in cli:
            assert violations(f"vibesys.{layer}.some_module", {module}), (layer, module)
    assert violations("vibesys.broker.engine_runner", {"vibesys.cli.render"})


def test_few_modules_at_the_top() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= TOP_MODULES, loose


def test_no_module_is_over_the_house_limit() -> None:
    long = sorted(
        f"{path.relative_to(PACKAGE)}: {lines}"
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    )
    assert long == []


def test_the_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sqlite3\nfrom vibesys.engine import Engine\n")
    assert imports_of(bad) == {"sqlite3", "vibesys.engine"}


def test_broker_imports() -> None:
    problems = []
    for module, allowed in BROKER_ALLOWED.items():
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        for imported in imports_of(path):
            if imported.startswith("vibesys") and not any(
                imported == a or imported.startswith(a + ".") for a in allowed
            ):
                problems.append(f"{module} imports {imported}")
            if module in BROKER_PURE and imported.split(".")[0] in IO_MODULES:
                problems.append(f"{module} (pure) imports {imported}")
    assert problems == []


def test_only_the_engine_runner_and_the_cli_reach_the_engine() -> None:
    reaching = sorted(
        "vibesys.broker." + path.stem
        for path in (PACKAGE / "broker").glob("*.py")
        if any(
            imported.startswith(("vibesys.engine", "vibesys.journal_schema", "vibesys.states"))
            for imported in imports_of(path)
        )
    )
    assert reaching == [
        "vibesys.broker.engine_runner",
        "vibesys.broker.run_slots",  # the journal's run_slots only (test_broker_imports)
        "vibesys.broker.startup",
    ]


def test_the_client_is_stdlib_only() -> None:
    import sys

    client = PACKAGE / "broker" / "client.py"
    outside = [m for m in imports_of(client) if m.split(".")[0] not in sys.stdlib_module_names]
    assert outside == []


#: The bridge's wire format is pure: nothing of vibesys but the service layer's line framing
#: (itself pure).
BRIDGE_PURE = {
    "vibesys.service.framing": (),
    "vibesys.bridge.protocol": ("vibesys.service.framing",),
    "vibesys.bridge.replies": ("vibesys.bridge.protocol", "vibesys.service.framing"),
}


def test_bridge_protocol_is_pure() -> None:
    problems = []
    for module, allowed in BRIDGE_PURE.items():
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        for imported in imports_of(path):
            if imported.startswith("vibesys") and imported not in allowed:
                problems.append(f"{module} imports {imported}")
            if imported.split(".")[0] in IO_MODULES:
                problems.append(f"{module} (pure) imports {imported}")
    assert problems == []


def test_only_the_runner_and_the_session_reach_the_engine() -> None:
    reaching = sorted(
        "vibesys.bridge." + path.stem
        for path in (PACKAGE / "bridge").glob("*.py")
        if any(imported.startswith("vibesys.engine") for imported in imports_of(path))
    )
    assert reaching == [
        "vibesys.bridge.driving",
        "vibesys.bridge.recorded",
        "vibesys.bridge.runner",
        "vibesys.bridge.session",
    ]


def test_the_eval_client_is_stdlib_only() -> None:
    import sys

    client = PACKAGE / "bridge" / "client.py"
    outside = [m for m in imports_of(client) if m.split(".")[0] not in sys.stdlib_module_names]
    assert outside == []


def test_wrapper_is_stdlib_only() -> None:
    wrapper = PACKAGE / "adapters" / "local_wrapper.py"
    assert not [m for m in imports_of(wrapper) if m.startswith("vibesys")]


#: The public names and where each one is defined, written out (not read from vibesys._PUBLIC).
PUBLIC_API = {
    "AsyncClient": "vibesys.client.aio",
    "Client": "vibesys.client",
    "Handle": "vibesys.client",
    "KeyConflict": "vibesys.client",
    "DriveOptions": "vibesys.engine",
    "Engine": "vibesys.engine",
    "FailureClass": "vibesys.states",
    "FakeAttempt": "vibesys.adapters.fake",
    "FakeBackend": "vibesys.adapters.fake",
    "JobState": "vibesys.states",
    "Journal": "vibesys.journal_schema",
    "Outcome": "vibesys.states",
    "RetryPolicy": "vibesys.engine",
    "VibesysError": "vibesys.errors",
    "drive": "vibesys.engine",
    "register": "vibesys.adapters.registry",
    "AdapterEntry": "vibesys.adapters.registry",
    "journal_path": "vibesys.journal_schema",
    "open_journal": "vibesys.journal_schema",
    "reconcile": "vibesys.engine",
    "replay": "vibesys.states",
    "wait_for": "vibesys.engine",
    "JobResult": "vibesys.job_result",
    "JobStatus": "vibesys.job_result",
    "result": "vibesys.job_result",
    "Session": "vibesys.session",
}


def test_public_api() -> None:
    assert set(vibesys.__all__) == {*PUBLIC_API, "__version__"}
    for name, module in PUBLIC_API.items():
        assert getattr(vibesys, name) is getattr(importlib.import_module(module), name), name
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert vibesys.__version__ == project["project"]["version"]
    with pytest.raises(AttributeError):
        _ = vibesys.NoSuchThing  # type: ignore[attr-defined]


#: The layers, lowest first: a module may import its own layer and those below, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vibesys.errors", "vibesys.strict_decode"),
    ("vibesys.osutil",),
    # the socket-service layer the bridge and the broker stand on
    ("vibesys.service",),
    ("vibesys.states", "vibesys.config", "vibesys.snapshot"),
    ("vibesys.journal_schema", "vibesys.adapters"),
    ("vibesys.engine", "vibesys.job_result", "vibesys.ui", "vibesys.sitecheck"),
    # one invocation from outside the engine: what the client's handles compose
    ("vibesys.invocation",),
    # the services: hosts of the engine, and the Python API beside the CLI
    ("vibesys.client", "vibesys.broker", "vibesys.bridge"),
    ("vibesys.session", "vibesys.cli"),
    ("vibesys", "vibesys.__main__"),
)
#: The most imports inside functions per 1,000 lines of the package.
FUNCTION_IMPORTS_PER_KLOC = 2.0


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(module: str) -> tuple[set[str], int]:
    """The vibesys modules `module` imports when it runs (module level and in functions; not
    under TYPE_CHECKING), and how many of its import statements are inside functions.
    `from P import N` counts as importing P.N when that is a module."""
    path = SOURCES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    in_functions = 0

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal in_functions
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                in_functions += in_function
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for alias in child.names:
                    named = f"{base}.{alias.name}"
                    found.add(named if named in SOURCES else base)
            is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, in_function or is_function)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return {m for m in found if m in SOURCES and m != module}, in_functions


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return cycles


def test_no_import_cycle() -> None:
    graph = {module: runtime_imports(module)[0] for module in SOURCES}
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix that names `module`'s layer."""
    best = (-1, -1)
    for number, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), number))
    assert best[1] >= 0, f"{module} is in no layer"
    return best[1]


def test_nothing_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} imports {imported}"
        for module in SOURCES
        for imported in runtime_imports(module)[0]
        if layer_of(imported) > layer_of(module)
    )
    assert upward == []


def test_few_imports_inside_functions() -> None:
    inside = sum(runtime_imports(module)[1] for module in SOURCES)
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in SOURCES.values())
    per_kloc = inside * 1000 / lines
    assert per_kloc <= FUNCTION_IMPORTS_PER_KLOC, (inside, lines)
