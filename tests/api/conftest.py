"""Import what the API loads lazily before any test traces a model.

pytest rewrites graphtool's modules (``--doctest-modules`` collects them). Seen here on CPython
3.11.7: a module first imported, and so rewritten, in the middle of a test that had traced models
failed in ``ast.parse`` with "SystemError: AST constructor recursion depth mismatch" (a CPython
check, apparently upset by the recursion limit torch raises while compiling). Importing them here,
at collection, keeps that off these tests.
"""

import importlib
import pkgutil

import graphtool

for _info in pkgutil.walk_packages(graphtool.__path__, "graphtool."):
    if not _info.name.startswith(("graphtool.cli", "graphtool.pytest_plugin", "graphtool.bundled")):
        importlib.import_module(_info.name)
