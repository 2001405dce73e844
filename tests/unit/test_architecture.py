"""The shape of the package: no module outside ``systems/<name>/`` imports that system.

The shared layers reach systems only through the registry (`mqforensics.systems`), so a new
system is a folder plus one line; this walks every module's imports (ast, so imports inside
functions count too) and names each one that breaks the rule.
"""

import ast
from pathlib import Path

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
