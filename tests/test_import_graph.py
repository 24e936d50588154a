"""The package's import graph has no cycle: each module can be read, and imported, after its dependencies.

Every import counts, lazy ones inside functions too; imports under ``if TYPE_CHECKING:`` do not. Importing
``a.b.c`` counts as importing ``a`` and ``a.b`` (their ``__init__`` runs first), except a module's own
packages, which are running already.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
PACKAGE = "toolwire"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every module a file imports, at load time or lazily in a function (a lazy cycle is still a cycle),
    except under ``if TYPE_CHECKING:``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        imports = _imports(ast.parse(path.read_text()), name, path.name == "__init__.py")
        direct = {i for i in imports if i in files and i != name}
        # Importing a.b.c first runs a/__init__ and a/b/__init__; a module's own packages are running
        # already, so only importing a name from one of them directly (``from a.b import x``) counts.
        implied = {".".join(i.split(".")[:k]) for i in direct for k in range(2, i.count(".") + 1)}
        own = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = direct | ((implied & files.keys()) - own - {name})
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return out


def test_no_module_imports_itself_back() -> None:
    graph = _graph()
    assert len(graph) > 40  # the scan found the package
    assert _cycles(graph) == []


def _crossings(graph: dict[str, set[str]], lower: str, upper: str) -> list[str]:
    """``module -> import`` for every module under ``lower`` that imports one under ``upper``."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module == lower or module.startswith(f"{lower}.")
        for target in targets
        if target == upper or target.startswith(f"{upper}.")
    )


def test_layers_point_one_way() -> None:
    """The store and the tools sit below the agent: neither imports it (the meaning of a stored step,
    history repair and a sub-agent's answers, lives with them), and the server uses only the agent's
    public modules."""
    graph = _graph()
    assert _crossings(graph, "toolwire.store", "toolwire.agent") == []
    assert _crossings(graph, "toolwire.tools", "toolwire.agent") == []
    private = [
        c for c in _crossings(graph, "toolwire.server", "toolwire.agent") if "._" in c.split(" -> ")[1]
    ]
    assert private == []


def test_the_direction_check_finds_an_upward_import() -> None:
    graph = {
        "toolwire.store.base": {"toolwire.agent.result"},
        "toolwire.agent.loop": {"toolwire.store.base"},
    }
    assert _crossings(graph, "toolwire.store", "toolwire.agent") == [
        "toolwire.store.base -> toolwire.agent.result"
    ]


def test_the_checker_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_agent_without_a_sql_store_does_not_load_sqlalchemy() -> None:
    """SQLAlchemy is ~250 ms of import: only a SQL store pays it (``from toolwire import Agent`` did)."""
    import subprocess
    import sys

    code = (
        "import sys; from toolwire import Agent, ScriptedModel, TextPart; "
        "Agent(ScriptedModel([[TextPart('hi')]])).run_sync('x'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'aiosqlite', 'asyncpg')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
