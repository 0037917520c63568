"""One name for one module: the FQN ``model.named_modules()`` gives it, whichever way dynamo reached it.

dynamo records each op's module stack (``nn_module_stack``) as *source* paths: how the compiled
frame reached the module object. For a plain ``forward(self, ...)`` that is ``L['self'].layers[0]``;
for a forward wrapped by a decorator taking ``*args`` (transformers' ``@can_return_tuple``,
``@auto_docstring`` and friends) the model is the wrapper's first argument, ``L['args'][0].model...``;
containers show up as ``getattr(L['self'].layers, '1')`` or ``._modules['fc']``. The eager side
(module hooks) and the parameters (``named_parameters``) already use the plain FQN; every view of a
compiled graph (memory, render, report) reads its module names through :func:`module_fqn` so all
of them agree.
"""

from __future__ import annotations

import re

_GETATTR = re.compile(r"getattr\((?P<obj>[^()]*?), '(?P<attr>[^']*)'\)")
# the model itself: the frame's ``self``, or a wrapper's first positional argument / ``self`` keyword
_ROOT = re.compile(r"^(?:L\['self'\]|L\['args'\]\[0\]|L\['kwargs'\]\['self'\])")
# any other local or global the frame reached the module through reads as that name
_OTHER_ROOT = re.compile(r"^[LG]\['([^']*)'\]")


def module_fqn(path: str | None) -> str | None:
    """A module's FQN from dynamo's ``nn_module_stack`` path ("" is the model itself).

    >>> module_fqn("L['self'].model.layers[0].self_attn"), module_fqn("getattr(L['self'].layers, '1').fc")
    ('model.layers.0.self_attn', 'layers.1.fc')
    >>> module_fqn("L['args'][0].model.layers.0.mlp.fc1"), module_fqn("L['self']"), module_fqn("G['step'].qkv")
    ('model.layers.0.mlp.fc1', '', 'step.qkv')
    """
    if path is None:
        return None
    text = str(path)
    while True:
        new = _GETATTR.sub(lambda m: f"{m.group('obj')}.{m.group('attr')}", text)
        if new == text:
            break
        text = new
    text = _ROOT.sub("", text)
    text = _OTHER_ROOT.sub(r"\1", text)
    text = re.sub(r"\._modules\['([^']*)'\]", r".\1", text)
    text = re.sub(r"\[(\d+)\]", r".\1", text)
    text = re.sub(r"\['([^']*)'\]", r".\1", text)
    return text.lstrip(".")


def class_name(cls) -> str:
    """``<class 'torch.nn.modules.linear.Linear'>`` (or the class itself) -> ``Linear``."""
    return getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].strip("'>")


def module_stack(node) -> list[tuple[str, str]]:
    """``(fqn, class name)`` per module an FX node sits in, outermost first; modules reached through
    two paths are listed once."""
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    found: dict[str, str] = {}
    for path, cls in stack.values():
        fqn = module_fqn(str(path))
        if fqn:
            found[fqn] = class_name(cls)
    return list(found.items())
