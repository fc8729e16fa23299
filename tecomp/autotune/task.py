"""Templates, tasks and the dispatch of configs to templates.

``@template(name)`` registers a function ``f(*args) -> (schedule, tensors)`` that calls
``get_config()`` for its knobs. Which config ``get_config()`` returns depends on how the
template is being run:

- ``task.instantiate(config)`` (and tuning) pins one config;
- a direct call ``f(*args)`` or ``task.instantiate()`` asks the active
  ``apply_history_best`` contexts (innermost first), then the shipped tuning logs, and
  otherwise uses the template's fallback config.

A ``Task`` is a template with concrete arguments and a target: it knows its config
space, its FLOP count (derived from the compute, never hand-entered) and a structural hash
of its compute that keys tuning records.
"""

from __future__ import annotations

import hashlib
import math
import threading

from ..errors import TecompError
from ..ir import expr as E
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity


class TemplateError(TecompError, ValueError):
    """A template name or its arguments are unknown or invalid."""


#: name -> Template. An explicit registry: the only global state of the autotuner.
TEMPLATES: dict[str, Template] = {}

_local = threading.local()


def _state():
    if not hasattr(_local, "cfg"):
        _local.cfg = None        # config of the template call in progress
        _local.contexts = []     # active apply_history_best contexts, innermost last
    return _local


class Template:
    """A registered tunable template; calling it returns ``(schedule, tensors)``."""

    def __init__(self, name: str, func):
        self.name = name
        self.func = func
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)
        self.__wrapped__ = func

    def __call__(self, *args, **kwargs):
        args = self.full_args(args, kwargs)
        return _run_with_config(self.func, args, dispatch(self.name, args))

    def full_args(self, args, kwargs=None) -> tuple:
        """All arguments in order with defaults filled in, so ``matmul(64, 64, 64)`` and
        ``matmul(64, 64, 64, "float32")`` are the same workload."""
        import inspect

        try:
            sig = inspect.signature(self.func)
            bound = sig.bind(*args, **(kwargs or {}))
            bound.apply_defaults()
            values = tuple(bound.arguments.values())
        except TypeError as err:
            raise TemplateError(
                f"template {self.name!r}{_sig_text(self.func)}: bad arguments {tuple(args)}: "
                f"{err}"
            ) from None
        except ValueError:  # no signature (a C function): take the args as given
            values = tuple(args)
        return canonical_args(values)

    def __repr__(self):
        return f"Template({self.name!r})"


def _sig_text(func) -> str:
    import inspect

    try:
        return str(inspect.signature(func))
    except (TypeError, ValueError):
        return "(...)"


def _run_with_config(func, args, cfg):
    st = _state()
    saved = st.cfg
    st.cfg = cfg
    try:
        return func(*args)
    finally:
        st.cfg = saved


def template(name: str):
    """Register a tunable template under ``name`` (a decorator).

    Examples
    --------
    >>> @autotune.template("example/add")
    ... def add(n):
    ...     A = te.placeholder((n,), name="A")
    ...     B = te.compute((n,), lambda i: A[i] + 1, name="B")
    ...     s = te.create_schedule(B.op)
    ...     cfg = autotune.get_config()
    ...     cfg.define_split("x", B.op.axis[0], num_outputs=2)
    ...     cfg["x"].apply(s, B, B.op.axis[0])
    ...     return s, [A, B]
    """
    if not isinstance(name, str) or not name:
        raise TemplateError(f"template name must be a non-empty string, got {name!r}")

    def deco(func):
        t = Template(name, func)
        TEMPLATES[name] = t
        return t

    return deco


def _load_builtin_templates():
    """Register the operator library's templates (matmul, conv2d, ...) on first use."""
    import importlib

    importlib.import_module("tecomp.topi")


def get_config():
    """The config of the template being run (see the module docstring). Outside any
    template call, a fresh fallback config, so template code runs as a plain function."""
    cfg = _state().cfg
    return cfg if cfg is not None else FallbackConfigEntity()


def canonical_args(args) -> tuple:
    """Arguments as a hashable, JSON-able tuple (lists become tuples, numpy ints ints)."""
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.append(canonical_args(a))
        elif isinstance(a, bool) or a is None or isinstance(a, str):
            out.append(a)
        elif hasattr(a, "dtype") and not isinstance(a, E.PrimExpr):  # numpy scalars
            out.append(a.item())
        elif isinstance(a, (int, float)):
            out.append(a)
        else:
            raise TemplateError(
                f"template argument {a!r} ({type(a).__name__}) must be an int, float, str, "
                f"bool, None or a tuple of those (it is written to the tuning log)"
            )
    return tuple(out)


# ---- dispatch -------------------------------------------------------------------------------


def current_target() -> str:
    """The target string of the innermost ``with tecomp.Target(...)`` scope, else "llvm"."""
    from ..target import Target

    cur = Target.current()
    return "llvm" if cur is None else str(cur)


def dispatch(name: str, args: tuple, target: str | None = None):
    """The config a direct call of template ``name`` gets: best matching record of the
    active ``apply_history_best`` contexts, then of the shipped logs, else the fallback."""
    from . import records

    target = target or current_target()
    st = _state()
    task = None
    sources = list(reversed(st.contexts))
    shipped = records.shipped_history()
    if shipped is not None:
        sources.append(shipped)
    for ctx in sources:
        if not ctx.has_workload(name, args):
            continue
        task = task or _cached_task(name, args, target)
        cfg = ctx.query(task, target)
        if cfg is not None:
            return cfg
    for ctx in st.contexts:
        ctx.note_fallback(name, args)
    return FallbackConfigEntity()


def _push_context(ctx):
    _state().contexts.append(ctx)


def _pop_context(ctx):
    contexts = _state().contexts
    if ctx in contexts:
        contexts.remove(ctx)


_TASK_CACHE: dict = {}


def _cached_task(name, args, target) -> Task:
    key = (name, args, target)
    t = _TASK_CACHE.get(key)
    if t is None:
        t = _TASK_CACHE[key] = Task(name, args, target)
    return t


# ---- tasks ------------------------------------------------------------------------------------


class Task:
    """A template with concrete arguments and a target.

    Attributes
    ----------
    name, args, target : the template name, its arguments (a tuple), the target string.
    config_space : ConfigSpace, collected by running the template once.
    flop : float, floating point operations of one run, derived from the compute.
    workload_hash : str, structural hash of the compute (keys tuning records).
    """

    def __init__(self, name: str, args, target="llvm"):
        if name not in TEMPLATES:
            _load_builtin_templates()
        if name not in TEMPLATES:
            known = ", ".join(sorted(TEMPLATES)) or "(none registered)"
            raise TemplateError(f"no template named {name!r}; registered: {known}")
        self.name = name
        self.template = TEMPLATES[name]
        self.args = self.template.full_args(tuple(args) if isinstance(args, (list, tuple))
                                            else (args,))
        self.target = str(target)
        self._space = None
        self._fallback = None
        self._flop = None
        self._hash = None

    @property
    def workload(self) -> tuple:
        return (self.name, self.args)

    @property
    def config_space(self) -> ConfigSpace:
        if self._space is None:
            space = ConfigSpace()
            try:
                _run_with_config(self.template.func, self.args, space)
            except TecompError:
                raise
            except Exception as err:
                raise TemplateError(
                    f"template {self.name!r} failed for args {self.args}: "
                    f"{type(err).__name__}: {err}"
                ) from err
            self._space = space
        return self._space

    def _run_fallback(self):
        if self._fallback is None:
            cfg = FallbackConfigEntity()
            s, tensors = _run_with_config(self.template.func, self.args, cfg)
            self._fallback = cfg
            self._hash = structural_hash(tensors)
            self._flop = count_flop(tensors)
        return self._fallback

    @property
    def default_config(self) -> ConfigEntity:
        """The fallback config as a point of the space (measured first when tuning)."""
        fb = self._run_fallback()
        return self.config_space.get(fb.index)

    @property
    def flop(self) -> float:
        self._run_fallback()
        return self._flop

    @property
    def workload_hash(self) -> str:
        self._run_fallback()
        return self._hash

    def instantiate(self, config=None):
        """``(schedule, tensors)`` for ``config``; without one, the best record under the
        active ``apply_history_best`` (or shipped logs), else the fallback config."""
        if config is None:
            config = dispatch(self.name, self.args, self.target)
        elif isinstance(config, int):
            config = self.config_space.get(config)
        return _run_with_config(self.template.func, self.args, config)

    def __repr__(self):
        return f"Task({self.name!r}, args={self.args}, target={self.target!r})"


def create_task(name: str, args, target="llvm") -> Task:
    """The tuning task of template ``name`` on ``args`` for ``target``.

    Raises
    ------
    TemplateError
        If no template is registered under ``name`` or it fails on ``args``.
    """
    task = Task(name, args, target)
    task.config_space  # noqa: B018 - fail here, with the template's error, not mid-tuning
    return task


# ---- facts derived from the compute ----------------------------------------------------------


def _ops_of(tensors) -> list:
    """Operations reachable from ``tensors``, inputs before the ops that read them."""
    order, seen = [], set()

    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for t in tensors:
        if hasattr(t, "op"):
            visit(t.op)
    return order


_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.Call)


def _arith_count(expr) -> int:
    """Arithmetic operations computing a value: index expressions of tensor reads and the
    conditions of selects (padding, bounds) are addressing, not work."""
    if isinstance(expr, (E.ProducerLoad, E.IntImm, E.FloatImm, E.Var)):
        return 0
    if isinstance(expr, E.Select):
        return max(_arith_count(expr.true_value), _arith_count(expr.false_value))
    if isinstance(expr, E.Reduce):
        return _arith_count(expr.source[expr.value_index]) + 1  # one combine per point
    n = 1 if isinstance(expr, _ARITH) else 0
    if isinstance(expr, E.Cast):
        return _arith_count(expr.value)
    for field in ("a", "b", "value", "body"):
        sub = getattr(expr, field, None)
        if isinstance(sub, E.PrimExpr):
            n += _arith_count(sub)
    if isinstance(expr, E.Call):
        n += sum(_arith_count(a) for a in expr.args)
    return n


def _const_int(e, what) -> int:
    if isinstance(e, E.IntImm):
        return int(e.value)
    raise TemplateError(f"{what} has the symbolic extent {e}; tuning needs concrete shapes")


def count_flop(tensors) -> float:
    """Floating point operations of computing ``tensors`` once (a multiply-add is 2)."""
    total = 0
    for op in _ops_of(tensors):
        body = getattr(op, "body", None)
        if not body:
            continue
        points = math.prod(_const_int(a.dom.extent, f"compute {op.name}") for a in op.axis)
        red = math.prod(
            _const_int(a.dom.extent, f"compute {op.name}") for a in op.reduce_axis
        )
        total += points * red * _arith_count(body[0]) if op.reduce_axis else (
            points * sum(_arith_count(b) for b in body)
        )
    return float(total)


def structural_hash(tensors) -> str:
    """A hash of the compute DAG of ``tensors``: shapes, dtypes, expressions with variables
    renamed by position. Names of tensors and axes do not matter; structure does."""
    ops = _ops_of(tensors)
    op_id = {id(op): i for i, op in enumerate(ops)}
    parts = []
    for op in ops:
        names: dict = {}

        def var_name(v):
            if v not in names:
                names[v] = f"v{len(names)}"
            return names[v]

        if not getattr(op, "body", None):
            parts.append(f"P({_shape_str(op.shape)},{op.dtype})")
            continue
        for a in op.axis:
            var_name(a.var)
        for a in op.reduce_axis:
            var_name(a.var)
        shape = _shape_str(tuple(a.dom.extent for a in op.axis))
        red = _shape_str(tuple(a.dom.extent for a in op.reduce_axis))
        bodies = ";".join(_expr_key(b, var_name, op_id) for b in op.body)
        parts.append(f"C({shape}|{red}|{bodies})")
    parts.append("out:" + ",".join(f"{op_id[id(t.op)]}.{t.value_index}"
                                   for t in tensors if hasattr(t, "op")))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _shape_str(shape) -> str:
    return ",".join(str(s) for s in shape)


def _expr_key(e, var_name, op_id) -> str:
    if isinstance(e, E.Var):
        return var_name(e)
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return f"{e.value!r}:{e.dtype}"
    if isinstance(e, E.StringImm):
        return repr(e.value)
    if isinstance(e, E.ProducerLoad):
        idx = ",".join(_expr_key(i, var_name, op_id) for i in e.indices)
        return f"T{op_id.get(id(e.tensor.op), '?')}.{e.tensor.value_index}[{idx}]"
    if isinstance(e, E.Reduce):
        src = ",".join(_expr_key(s, var_name, op_id) for s in e.source)
        comb = ",".join(_expr_key(r, var_name, op_id) for r in e.combiner.result)
        for v in e.combiner.lhs + e.combiner.rhs:
            var_name(v)
        cond = _expr_key(e.condition, var_name, op_id)
        return f"R[{comb}]({src}|{cond}|{e.value_index})"
    if isinstance(e, E.Call):
        return f"{e.name}:{e.dtype}(" + ",".join(_expr_key(a, var_name, op_id)
                                                 for a in e.args) + ")"
    fields = []
    for f in ("a", "b", "cond", "true_value", "false_value", "value", "var", "body"):
        sub = getattr(e, f, None)
        if isinstance(sub, E.PrimExpr):
            fields.append(_expr_key(sub, var_name, op_id))
    return f"{type(e).__name__}:{e.dtype}(" + ",".join(fields) + ")"
