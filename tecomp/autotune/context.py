"""The autotuner's per-thread dispatch state: the config of the template call in
progress and the active ``apply_history_best`` contexts.

Template dispatch (``task``) reads it and ``ApplyHistoryBest`` (``records``) pushes and
pops itself on it; it lives below both so neither imports the other for it.
"""

from __future__ import annotations

import threading

_local = threading.local()


def state():
    """This thread's dispatch state: ``.cfg`` (the config of the template call in
    progress, or None) and ``.contexts`` (active contexts, innermost last)."""
    if not hasattr(_local, "cfg"):
        _local.cfg = None
        _local.contexts = []
    return _local


def push_context(ctx) -> None:
    state().contexts.append(ctx)


def pop_context(ctx) -> None:
    contexts = state().contexts
    if ctx in contexts:
        contexts.remove(ctx)
