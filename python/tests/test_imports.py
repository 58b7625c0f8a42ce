"""Every module of the package imports alone, in a fresh interpreter, and imports the package's
modules at its top only: none hides in a function, so that no cycle hides either. (An optional
third-party module, NumPy, is imported where it is needed.)"""
import ast
import os
import subprocess
import sys

import kprof

PACKAGE = os.path.dirname(os.path.abspath(kprof.__file__))
MODULES = sorted(name[:-3] for name in os.listdir(PACKAGE)
                 if name.endswith(".py") and name != "__init__.py")


def test_each_module_imports_alone():
    assert "client" in MODULES and "farm_batch" in MODULES
    for name in MODULES:
        done = subprocess.run([sys.executable, "-c", f"import kprof.{name}"],
                              capture_output=True, text=True, env=os.environ, check=False)
        assert done.returncode == 0, f"kprof.{name}: {done.stderr[-2000:]}"


def _package_module(node):
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "kprof"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "kprof" for alias in node.names)
    return False


def test_no_module_imports_the_package_inside_a_function():
    for name in MODULES + ["__init__"]:
        path = os.path.join(PACKAGE, name + ".py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if _package_module(n)]
                assert not inner, f"kprof/{name}.py:{inner[0].lineno} imports inside " \
                                  f"{node.name}()"
