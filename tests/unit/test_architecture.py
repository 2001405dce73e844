"""The shape of the package (docs/architecture.md): layers that point one way, no circle, no
module outside ``systems/<name>/`` importing that system, argparse only at the command-line edge,
and every system folder on the one template.

The shared layers reach systems only through the registry (`mqforensics.systems`), so a new
system is a folder plus one line. The walks read every module's imports with ast: imports inside
functions, under ``TYPE_CHECKING`` and relative ones count too.
"""

import ast
from pathlib import Path

import pytest

from mqforensics import systems

PACKAGE = Path(systems.__file__).resolve().parents[1]


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _system_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["mqforensics", "systems"] and len(parts) > 2:
        return parts[2]
    return None


def violations(package: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        owner = (
            relative.parts[1]
            if relative.parts[0] == "systems" and len(relative.parts) > 2
            else None
        )
        if relative == Path("systems/__init__.py"):
            continue
        for line, module in _imported(ast.parse(path.read_text(), str(path))):
            system = _system_of(module)
            if system is not None and system != owner:
                bad.append(f"mqforensics/{relative}:{line} imports {module}")
    return sorted(set(bad))


def test_no_module_outside_a_system_imports_it():
    assert violations() == []


def test_the_walk_finds_an_import_inside_a_function(tmp_path):
    package = tmp_path / "mqforensics"
    (package / "systems" / "alpha").mkdir(parents=True)
    (package / "shared.py").write_text("def f():\n    from mqforensics.systems.alpha import x\n")
    (package / "systems" / "alpha" / "x.py").write_text("from mqforensics.systems.alpha import y\n")
    (package / "systems" / "beta").mkdir()
    (package / "systems" / "beta" / "z.py").write_text("import mqforensics.systems.alpha.x\n")
    assert violations(package) == [
        "mqforensics/shared.py:2 imports mqforensics.systems.alpha",
        "mqforensics/shared.py:2 imports mqforensics.systems.alpha.x",
        "mqforensics/systems/beta/z.py:1 imports mqforensics.systems.alpha.x",
    ]


def test_every_registered_system_is_a_folder_with_a_spec():
    for name in systems.SYSTEMS:
        spec = systems.get(name)
        assert spec.name == name
        assert (PACKAGE / "systems" / name / "spec.py").is_file()
        names = [check.name for check in spec.checks]
        assert len(names) == len(set(names)), name
        for check in spec.checks:
            assert check.what and check.why and check.todo, (name, check.name)


# --- layers -------------------------------------------------------------------------------------

# Top to bottom (docs/architecture.md, "Layers"): an import may only point to its own layer or a
# lower one. A module's layer is that of the longest prefix listed; anything else is "shared".
LAYERS = ("edge", "api", "flows", "systems", "shared")
LAYER_OF = {
    "mqforensics": "edge",  # the package itself: the API's names, imported when first used
    "mqforensics.__main__": "edge",
    "mqforensics.cli": "edge",
    "mqforensics.api": "api",
    "mqforensics.api_history": "api",
    "mqforensics.api_receipt": "api",
    "mqforensics.history": "flows",
    "mqforensics.runner": "flows",
    "mqforensics.planning": "flows",
    "mqforensics.sample_demo": "flows",
    "mqforensics.purge.engine": "flows",
    "mqforensics.systems": "systems",
}
# The one package whose modules may import argparse.
EDGE = "mqforensics.cli"
# The modules every system folder has, one role each (docs/architecture.md, "One system
# template"); `purge.py` only when the system plans actions of its own.
TEMPLATE = (
    "spec", "options", "read", "frames", "checks", "plan", "purge", "views", "sample", "metrics",
)  # fmt: skip


def layer(module: str) -> str:
    if module == "mqforensics":
        return LAYER_OF[module]
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        found = LAYER_OF.get(".".join(parts[:end]))
        if found is not None:
            return found
    return "shared"


def modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package) for every module of `package`."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line}, among the package's own modules. ``from a import
    b`` points to module ``a.b`` when there is one, else to ``a``; relative imports resolved."""
    known = modules(package)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in known.items():
        here = name if is_package else name.rpartition(".")[0]
        targets: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        targets.setdefault(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    target = full if full in known else source
                    if target in known:
                        targets.setdefault(target, node.lineno)
        targets.pop(name, None)
        graph[name] = targets
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def upward_arrows(graph: dict[str, dict[str, int]]) -> list[str]:
    bad = []
    for source, targets in sorted(graph.items()):
        for target, line in sorted(targets.items()):
            if LAYERS.index(layer(target)) < LAYERS.index(layer(source)):
                bad.append(f"{source}:{line} ({layer(source)}) imports {target} ({layer(target)})")
    return bad


def registry_lookups(graph: dict[str, dict[str, int]]) -> list[str]:
    """A system's module that consults the registry (the package ``mqforensics.systems``)."""
    return [
        f"{source}:{targets['mqforensics.systems']} consults the registry"
        for source, targets in sorted(graph.items())
        if source.startswith("mqforensics.systems.") and "mqforensics.systems" in targets
    ]


def argparse_outside_edge(package: Path = PACKAGE) -> list[str]:
    bad = []
    for name, (path, _) in modules(package).items():
        if name == EDGE or name.startswith(EDGE + "."):
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )  # fmt: skip
            if "argparse" in names:
                bad.append(f"{name}:{node.lineno} imports argparse")
    return bad


def test_no_import_circle_anywhere_in_the_package():
    assert circles(import_graph()) == []


def test_every_import_points_down_the_layers():
    assert upward_arrows(import_graph()) == []


def test_no_system_consults_the_registry():
    assert registry_lookups(import_graph()) == []


def test_argparse_lives_only_at_the_command_line_edge():
    assert argparse_outside_edge() == []


@pytest.mark.parametrize("name", list(systems.SYSTEMS))
def test_every_system_folder_follows_the_template(name):
    folder = PACKAGE / "systems" / name
    spec = systems.get(name)
    required = [role for role in TEMPLATE if role not in ("purge", "views")]
    missing = [role for role in required if not (folder / f"{role}.py").is_file()]
    assert missing == [], f"{name} lacks {missing}"
    # The executors live in purge.py, the planner in plan.py, the options class in options.py.
    assert spec.options.__module__ == f"mqforensics.systems.{name}.options"
    # What the run history trends is measured in metrics.py (docs/history.md).
    assert spec.metrics is not None
    assert (
        spec.metrics.__doc__ == f"mqforensics.systems.{name}.metrics.measure, imported when called."
    )
    if spec.rule_kinds:
        assert (folder / "purge.py").is_file() or not list(spec.rule_kinds)


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "mqforensics"
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_the_layer_walk_sees_relative_and_lazy_imports(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "api.py": "from mqforensics import runner\n",
        "runner.py": "def f():\n    from . import api\n",
        "units.py": "from .systems import alpha\n",
        "systems/__init__.py": "",
        "systems/alpha/__init__.py": "",
        "systems/alpha/spec.py": "from mqforensics import systems\nfrom ..alpha import spec\n",
        "cli/__init__.py": "import argparse\n",
        "shared.py": "import argparse\n",
    })  # fmt: skip
    graph = import_graph(package)
    assert circles(graph) == [["mqforensics.api", "mqforensics.runner"]]
    assert upward_arrows(graph) == [
        "mqforensics.runner:2 (flows) imports mqforensics.api (api)",
        "mqforensics.units:1 (shared) imports mqforensics.systems.alpha (systems)",
    ]
    assert registry_lookups(graph) == ["mqforensics.systems.alpha.spec:1 consults the registry"]
    assert argparse_outside_edge(package) == ["mqforensics.shared:1 imports argparse"]
