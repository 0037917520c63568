"""graphtool: see what torch.compile, AOT autograd and CUDA graphs will do to a model.

The package is layered in one direction: ``cli -> api -> commands -> render -> analysis -> capture``.
Only ``capture`` touches torch internals (through ``capture.compat``); importing
``graphtool`` itself imports nothing heavy (no torch, no rich), so ``graphtool --help`` stays fast.

The public API works on model objects and scripts (see :mod:`graphtool.api`), and is loaded on first use::

    s = graphtool.load(model, x)     # or graphtool.load("model.py", ddp=True): a Session, loaded once
    s.trace(); s.cudagraphs(); s.memory(fit="24GiB"); s.report(output="r.html")

    graphtool.trace(model, x)        graphtool.mutations(model, x)   graphtool.devices(model, x)
    graphtool.cudagraphs(model, x)   graphtool.memory(model, x)      graphtool.lint(model, x)
    graphtool.render(model, x)       graphtool.report(model, x)      graphtool.shapes(model, x, schedule=...)
    graphtool.bench(model, x)        graphtool.compile("model.py")   (a real compile, in fresh processes)

with test assertions in :mod:`graphtool.testing` and a pytest plugin in :mod:`graphtool.pytest_plugin`.
``graphtool.render`` is also the presentation package (``graphtool.render.dot``...): calling it calls
:func:`graphtool.api.render`.
"""

import types as _types

__version__ = "0.1.0"

#: (oldest torch graphtool runs on, newest torch it is tested on). Older: exit 2; newer: runs, warns once.
SUPPORTED_TORCH = ((2, 11), (2, 15))

_API = frozenset({"trace", "mutations", "devices", "cudagraphs", "memory", "lint", "report", "shapes", "bench",
                  "compile", "Result", "Session", "load"})
__all__ = sorted(_API | {"render", "testing", "__version__"})


def _load(module: str):
    # imported by name on first use: the layers below read only __version__ from this package, and a
    # static import here would make each of them (for import-linter) a client of the API above them
    import importlib

    return importlib.import_module(module)


def __getattr__(name: str):
    if name in _API:
        return getattr(_load("graphtool.api"), name)
    if name == "testing":
        return _load("graphtool.testing")
    raise AttributeError(f"module 'graphtool' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _API | {"testing"})


class _RenderPackage(_types.ModuleType):
    """``graphtool.render``: the presentation package, and callable as :func:`graphtool.api.render`."""

    def __call__(self, model, *args, **kwargs):
        return _load("graphtool.api").render(model, *args, **kwargs)


def _callable_render_package() -> None:
    _load("graphtool.render").__class__ = _RenderPackage  # a docstring only: its modules load on use


_callable_render_package()
