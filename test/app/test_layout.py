"""The package layout keeps the robot's runtime apart from the tools: no runtime module imports ``parapush_ros.tools``
(not even inside a function), and importing the whole runtime loads none of the tools' dependencies, so a robot
install may leave out the ``[tools]`` lines of requirements.txt."""
import ast
import subprocess
import sys
from pathlib import Path

import parapush_ros

PKG = Path(parapush_ros.__file__).parent
REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"
IMPORT_NAMES = {"scikit-learn": "sklearn"}  # pip name -> import name, where they differ
# the [tools] packages of requirements.txt, by import name
TOOLS_ONLY = tuple(IMPORT_NAMES.get(n, n) for n in (line.split("==")[0].strip() for line in
                   REQUIREMENTS.read_text().splitlines() if "# [tools]" in line and not line.startswith("#")))
LOADED_BY_TOOLS = tuple(n for n in TOOLS_ONLY if n != "tqdm")  # (torch itself imports tqdm where it is installed)
# cli.py is the one door to both: it imports each subcommand's module when that subcommand runs
RUNTIME_FILES = [p for p in sorted(PKG.rglob("*.py")) if "tools" not in p.relative_to(PKG).parts
                 and p.name != "cli.py"]


def _imports(path: Path):
    """(module imported, line) of every import in ``path``, relative ones resolved against its package."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])  # a module's package; an __init__'s is its own
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                yield (f"{mod}.{a.name}" if node.module is None else mod), node.lineno


def test_no_runtime_module_imports_the_tools_or_their_dependencies():
    assert {"matplotlib", "sklearn", "tqdm"} <= set(TOOLS_ONLY), TOOLS_ONLY
    bad = [f"{p.relative_to(PKG)}:{line}: {mod}" for p in RUNTIME_FILES for mod, line in _imports(p)
           if mod.startswith("parapush_ros.tools") or mod.split(".")[0] in TOOLS_ONLY]
    # imported inside the function that needs them: matplotlib when a figure is drawn (parapush sim's executed
    # path), scikit-learn when paper 004's GP baseline is fitted (a bench's model, never the stack's)
    allowed = {"plots.py": "matplotlib", "sim_runner.py": "matplotlib", "core/models/gp.py": "sklearn"}
    bad = [b for b in bad if allowed.get(b.split(":")[0]) != b.split(": ")[1].split(".")[0]]
    assert not bad, "runtime modules import tools:\n" + "\n".join(bad)


def test_importing_the_whole_runtime_loads_no_tool():
    modules = sorted({".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
                      for p in RUNTIME_FILES})
    code = (
        "import importlib, sys\n"
        "try:\n    import rclpy  # noqa\nexcept ImportError:\n    rclpy = None\n"
        f"for m in {modules!r}:\n"
        "    if rclpy is None and m.split('.')[1] in ('ros', 'nodes', 'sim_runner', 'teleop', 'bringup'):\n"
        "        continue\n"
        "    importlib.import_module(m)\n"
        "print(sorted(n for n in sys.modules\n"
        f"             if n.startswith('parapush_ros.tools') or n.split('.')[0] in {LOADED_BY_TOOLS!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]", out.stdout


def _top_level_names(path: Path) -> set:
    """Names a module binds at its top level (also inside top-level if / try blocks)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def test_every_import_inside_the_package_names_what_exists():
    """Relative imports are often inside functions (imported when a command runs), where importing the module does
    not reach them: each one must name a module of the package or a name its target binds (a moved module leaves
    no stale path behind)."""
    files = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in PKG.rglob("*.py")}
    bad = []
    for mod, path in files.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            ours = isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("parapush_ros"))
            if not ours:
                continue
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target not in files:
                bad.append(f"{path.relative_to(PKG)}:{node.lineno}: no module {target}")
                continue
            bound = None
            for a in node.names:
                if a.name == "*" or f"{target}.{a.name}" in files:
                    continue
                bound = _top_level_names(files[target]) if bound is None else bound
                if a.name not in bound:
                    bad.append(f"{path.relative_to(PKG)}:{node.lineno}: {target} has no {a.name}")
    assert not bad, "\n".join(bad)
