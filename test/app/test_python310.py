"""The code runs on Python 3.10 to 3.12 (issue 31): every Python file parses with the 3.10 grammar and imports no
standard-library name that 3.10 lacks. ruff (``target-version = "py310"``) only suggests rewrites valid on 3.10; this
catches newer syntax (``except*``, ``type X = ...``, generic ``def f[T]``) and the usual 3.11+ standard-library
names."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for d in ("src", "test", "launch", "scripts") if (ROOT / d).is_dir()
                 for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)

# (module, name) pairs that appeared after 3.10; a module alone (name None) is new as a whole
NEWER = {
    ("tomllib", None), ("wsgiref.types", None),
    ("datetime", "UTC"), ("enum", "StrEnum"), ("enum", "verify"), ("enum", "ReprEnum"),
    ("typing", "Self"), ("typing", "LiteralString"), ("typing", "Never"), ("typing", "assert_never"),
    ("typing", "reveal_type"), ("typing", "Required"), ("typing", "NotRequired"), ("typing", "TypeVarTuple"),
    ("typing", "Unpack"), ("typing", "dataclass_transform"), ("typing", "override"), ("typing", "TypeAliasType"),
    ("asyncio", "TaskGroup"), ("asyncio", "timeout"), ("asyncio", "Runner"), ("contextlib", "chdir"),
    ("hashlib", "file_digest"), ("itertools", "batched"), ("math", "cbrt"), ("math", "exp2"),
    ("operator", "call"), ("warnings", "deprecated"),
}
NEWER_BUILTINS = {"ExceptionGroup", "BaseExceptionGroup"}


def test_the_sources_are_found():
    assert len(SOURCES) > 50 and any(p.name == "conftest.py" for p in SOURCES)


def _newer_names(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if (a.name, None) in NEWER]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{a.name}" for a in node.names
                      if (node.module, None) in NEWER or (node.module, a.name) in NEWER]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                (node.value.id, node.attr) in NEWER:
            found.append(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NEWER_BUILTINS:
            found.append(node.id)
    return found


def test_parses_as_python_3_10_and_uses_no_newer_standard_library_names():
    problems = []
    for path in SOURCES:
        name = str(path.relative_to(ROOT))
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=name, feature_version=(3, 10))
        except SyntaxError as e:
            problems.append(f"{name}:{e.lineno}: not Python 3.10: {e.msg}")
            continue
        problems += [f"{name}: {n} is newer than Python 3.10" for n in _newer_names(tree)]
    assert problems == []


def test_the_check_catches_newer_code():
    with pytest.raises(SyntaxError):
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=(3, 10))
    with pytest.raises(SyntaxError):
        ast.parse("type Vector = list[float]\n", feature_version=(3, 10))
    newer = _newer_names(ast.parse("import tomllib\nfrom typing import Self\nimport datetime\nt = datetime.UTC\n"
                                   "raise ExceptionGroup('x', [])\n"))
    assert sorted(newer) == ["ExceptionGroup", "datetime.UTC", "tomllib", "typing.Self"]
