"""Visitors and mutators over expressions and statements.

``IRMutator`` dispatches on the node's class through a per-class method table (built
once), and returns the *same object* when nothing below a node changed, so passes that
change nothing allocate nothing and identity checks tell whether a pass did any work.
"""

from __future__ import annotations

from . import expr as E
from .buffer import buffer_key


def _method_name(cls) -> str:
    return "visit_" + cls.__name__


class IRMutator:
    """Rebuilds a tree bottom-up. Override ``visit_<Class>`` to transform a node kind;
    call ``self.generic(node)`` inside to transform the children first."""

    def __init__(self):
        self._table = {}

    def __call__(self, node):
        return self.visit(node)

    def visit(self, node):
        if node is None:
            return None
        fn = self._table.get(type(node))
        if fn is None:
            fn = self._resolve(type(node))
            self._table[type(node)] = fn
        return fn(node)

    def _resolve(self, cls):
        for klass in cls.__mro__:
            m = getattr(self, _method_name(klass), None)
            if m is not None:
                return m
        return self.generic

    def generic(self, node):
        """Visit every child field; rebuild the node only if a child changed."""
        rebuild = _REBUILDERS.get(type(node))
        if rebuild is None:
            names = getattr(type(node), "child_fields", ())
            rebuild = _REBUILDERS[type(node)] = _fields_rebuilder(type(node), names)
        return rebuild(self, node)


def _fields_rebuilder(cls, names):
    def rebuild(m, node):
        changed = False
        vals = []
        for n in names:
            old = getattr(node, n)
            new = _visit_child(m, old)
            changed |= new is not old
            vals.append(new)
        if not changed:
            return node
        kw = {n: getattr(node, n) for n in cls.__dataclass_fields__}
        kw.update(zip(names, vals))
        return cls(**kw)

    return rebuild


def _visit_child(m, value):
    if isinstance(value, tuple):
        new = tuple(_visit_child(m, v) for v in value)
        if all(a is b for a, b in zip(new, value)):
            return value
        return new
    if isinstance(value, E.Node):
        return m.visit(value)
    return value


#: node class -> the function that rebuilds it from visited children (built on first use).
_REBUILDERS: dict = {}


def children(node) -> tuple:
    """The direct expression/statement children of ``node``, in field order."""
    names = getattr(type(node), "child_fields", ())
    out = []
    for n in names:
        v = getattr(node, n)
        if isinstance(v, tuple):
            out.extend(x for x in v if x is not None)
        elif v is not None:
            out.append(v)
    return tuple(out)


def post_order_visit(node, fn) -> None:
    """Call ``fn`` on every node below and including ``node``, children first, once each."""
    seen = set()
    stack = [(node, False)]
    while stack:
        n, done = stack.pop()
        if done:
            fn(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for c in reversed(children(n)):
            stack.append((c, False))


def collect_vars(node) -> list:
    """The distinct ``Var``s used in ``node``, in order of first appearance."""
    out = {}

    def fn(n):
        if isinstance(n, E.Var):
            out.setdefault(n, None)

    post_order_visit(node, fn)
    return list(out)


def uses_var(node, variables) -> bool:
    """Whether any of ``variables`` (a Var or a collection) occurs in ``node``."""
    if isinstance(variables, E.Var):
        variables = {variables}
    variables = set(variables)
    found = False

    def fn(n):
        nonlocal found
        if n in variables:
            found = True

    post_order_visit(node, fn)
    return found


class _Substituter(IRMutator):
    def __init__(self, vmap):
        super().__init__()
        self.vmap = vmap

    def visit_Var(self, v):
        return self.vmap.get(v, v)


class _BufferRebinder(IRMutator):
    def __init__(self, mapping):
        super().__init__()
        self.mapping = mapping

    def visit_Load(self, e):
        e = self.generic(e)
        new = self.mapping.get(buffer_key(e.buffer))
        return e if new is None else E.Load(new, e.index, e.dtype)

    def visit_Store(self, s):
        s = self.generic(s)
        new = self.mapping.get(buffer_key(s.buffer))
        return s if new is None else type(s)(new, s.value, s.index)


def substitute_buffers(node, mapping: dict):
    """Replace every load and store of a buffer that ``mapping`` has as a key by one of
    its value (buffer -> buffer, matched by storage: :func:`.buffer.buffer_key`)."""
    if not mapping:
        return node
    return _BufferRebinder({buffer_key(k): v for k, v in mapping.items()}).visit(node)


def substitute(node, vmap: dict):
    """Replace every ``Var`` key of ``vmap`` in ``node`` by its value (an expression)."""
    if not vmap:
        return node
    vmap = {k.var if isinstance(k, E.IterVar) else k: E.as_expr(v) for k, v in vmap.items()}
    return _Substituter(vmap).visit(node)
