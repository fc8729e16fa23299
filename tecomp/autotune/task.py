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
of its compute that keys tuning records. The template runs inside ``with task.target:``, so
it (and the dispatch of nested template calls) can read ``Target.current()``.

The registry starts empty: the autotuner knows no operator. The operator library
(``tecomp.topi``) registers the built-in templates when it is imported, which
``tecomp.autotune`` / ``tecomp.topi`` attribute access and the ``tecomp`` command do.
"""

from __future__ import annotations

import inspect

from ..errors import TecompError
from ..ir import expr as E
from ..target import Target, as_target
from ..te.analysis import count_flop, structural_hash
from . import records
from .context import state as _state
from .space import ConfigEntity, ConfigSpace, FallbackConfigEntity


class TemplateError(TecompError, ValueError):
    """A template name or its arguments are unknown or invalid."""


#: name -> Template. An explicit registry: the only global state of the autotuner.
TEMPLATES: dict[str, Template] = {}



class Template:
    """A registered tunable template; calling it returns ``(schedule, tensors)``."""

    def __init__(self, name: str, func, label=None, seeds=None):
        self.name = name
        self.func = func
        self._label = label
        self._seeds = seeds
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)
        self.__wrapped__ = func

    def __call__(self, *args, **kwargs):
        args = self.full_args(args, kwargs)
        return _run_with_config(self.func, args, dispatch(self.name, args))

    def full_args(self, args, kwargs=None) -> tuple:
        """All arguments in order with defaults filled in, so ``matmul(64, 64, 64)`` and
        ``matmul(64, 64, 64, "float32")`` are the same workload."""
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

    def forms(self, args: tuple) -> tuple:
        """``args`` (all of them, as :meth:`full_args` gives) and each shorter tuple that
        leaves off trailing arguments at their defaults: the forms a record of this
        workload may have been logged in before the template grew those parameters."""
        try:
            params = list(inspect.signature(self.func).parameters.values())
        except ValueError:
            return (args,)
        out = [args]
        for k in range(len(args) - 1, -1, -1):
            if k >= len(params) or params[k].default is inspect.Parameter.empty or \
                    canonical_args((params[k].default,)) != (args[k],):
                break
            out.append(args[:k])
        return tuple(out)

    def seeds(self, args: tuple, target: Target) -> tuple:
        """``((name, args), ...)``: workloads whose configs are points of this template's
        space for ``args`` on ``target`` (the template's own ``seeds`` function says
        which; none without one). A tuning session measures their records first."""
        return tuple(self._seeds(args, target)) if self._seeds is not None else ()

    def label(self, args: tuple) -> str:
        """A one-line name of the workload ``args`` for summaries and logs: the template's
        own ``label`` function if it has one, else ``name(args)``."""
        return self._label(args) if self._label is not None else f"{self.name}{args}"

    def __repr__(self):
        return f"Template({self.name!r})"


def _sig_text(func) -> str:
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


def template(name: str, label=None, seeds=None):
    """Register a tunable template under ``name`` (a decorator); ``label(args) -> str``,
    if given, names a workload in one line where its arguments are long (a fused group's
    description); ``seeds(args, target) -> ((name, args), ...)``, if given, names the
    workloads whose configs are points of the space (a fused kernel's anchor, tuned alone
    in logs written before), whose records a tuning session measures first.

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
        t = Template(name, func, label, seeds)
        TEMPLATES[name] = t
        return t

    return deco


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


def _workload_args(name: str, args) -> tuple:
    """``args`` (a tuple, or one argument) of the template registered as ``name``, all in
    order with defaults filled in.

    Raises
    ------
    TemplateError
        No template is registered as ``name`` (the message lists those that are), or the
        arguments do not fit its signature.
    """
    template = TEMPLATES.get(name)
    if template is None:
        known = ", ".join(sorted(TEMPLATES)) or "(none registered)"
        raise TemplateError(
            f"no template named {name!r}; registered: {known} (the built-in operator "
            f"templates, e.g. matmul and conv2d, are registered by importing tecomp.topi)"
        )
    return template.full_args(tuple(args) if isinstance(args, (list, tuple)) else (args,))


# ---- dispatch -------------------------------------------------------------------------------


def current_target() -> Target:
    """The target of the innermost ``with tecomp.Target(...)`` scope, else ``llvm`` (the
    host)."""
    return as_target(Target.current())


def dispatch(name: str, args: tuple, target: Target | str | None = None):
    """The config a direct call of template ``name`` gets: best matching record of the
    active ``apply_history_best`` contexts, then of the shipped logs, else the fallback.
    Records are matched against ``target`` (default: the current target scope)."""
    target = current_target() if target is None else as_target(target)
    st = _state()
    task = None
    sources = list(reversed(st.contexts))
    shipped = records.shipped_history()
    if shipped is not None:
        sources.append(shipped)
    forms = TEMPLATES[name].forms(args) if name in TEMPLATES else (args,)
    for ctx in sources:
        if not any(ctx.has_workload(name, a) for a in forms):
            continue
        task = task or _cached_task(name, args, target)
        cfg = ctx.query(task, target)
        if cfg is not None:
            return cfg
    for ctx in st.contexts:
        ctx.note_fallback(name, args)
    return FallbackConfigEntity()


def has_tuned_record(name: str, args, target: Target | str | None = None) -> bool:
    """Whether a tuned record applies to template ``name`` on ``args`` for ``target``.

    The record is the one a call of the template (and ``Task.best_config``) would use: of
    the active ``apply_history_best`` contexts, then of the shipped logs. Without one the
    call gets the fallback config, and the active contexts note the workload as a
    fallback, as they do for the call.

    Parameters
    ----------
    name : str
        A registered template.
    args : tuple
        The template's arguments (defaults are filled in).
    target : Target or str, optional
        Whose records apply (default: the current target scope, else ``llvm``).

    Raises
    ------
    TemplateError
        ``name`` is not a registered template, or ``args`` do not fit it.

    Examples
    --------
    >>> with autotune.apply_history_best("matmul.json"):
    ...     has_tuned_record("matmul", (512, 512, 512), "llvm")
    True
    """
    return not dispatch(name, _workload_args(name, args), target).is_fallback


def tuned_cost(name: str, args, target: Target | str | None = None) -> float | None:
    """The time of the record :func:`has_tuned_record` finds for template ``name`` on
    ``args`` (its median cost, seconds), or None without one. What a graph weighs when it
    chooses between workloads, such as a convolution's channel blocks.

    Parameters
    ----------
    name : str
        A registered template.
    args : tuple
        The template's arguments (defaults are filled in).
    target : Target or str, optional
        Whose records apply (default: the current target scope, else ``llvm``).

    Returns
    -------
    float or None

    Raises
    ------
    TemplateError
        ``name`` is not a registered template, or ``args`` do not fit it.
    """
    target = current_target() if target is None else as_target(target)
    args = _workload_args(name, args)
    shipped = records.shipped_history()
    sources = [*reversed(_state().contexts), *([shipped] if shipped is not None else [])]
    forms = TEMPLATES[name].forms(args)
    for ctx in sources:
        if any(ctx.has_workload(name, a) for a in forms):
            rec = ctx.best_record(_cached_task(name, args, target), target)
            if rec is not None:
                return rec.cost
    return None


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
    name : str
        The template's name.
    args : tuple
        The template's arguments.
    target : Target
        The scope the template runs in; ``str(task.target)`` is the target string written
        to tuning logs.
    config_space : ConfigSpace
        Collected by running the template once.
    flop : float
        Floating point operations of one run, derived from the compute.
    workload_hash : str
        Structural hash of the compute (keys tuning records).
    weight : int
        How many times the workload runs in one run of a model (``extract_tasks`` sets
        it; 1 for a task made on its own).
    """

    def __init__(self, name: str, args, target: Target | str = "llvm"):
        self.args = _workload_args(name, args)
        self.name = name
        self.template = TEMPLATES[name]
        #: ``args`` and the shorter forms older records of this workload have
        #: (:meth:`Template.forms`)
        self.workload_forms = self.template.forms(self.args)
        self.target = as_target(target)
        self.weight = 1
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
                self._run(space)
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
            s, tensors = self._run(cfg)
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

    def best_config(self) -> ConfigEntity:
        """The config ``instantiate()`` uses, as a point of the space: the best record
        that applies (active ``apply_history_best`` contexts, then the shipped logs),
        else the fallback config."""
        cfg = dispatch(self.name, self.args, self.target)
        return self.default_config if cfg.is_fallback else cfg

    def instantiate(self, config=None):
        """``(schedule, tensors)`` for ``config``; without one, the best record under the
        active ``apply_history_best`` (or shipped logs), else the fallback config."""
        if config is None:
            config = dispatch(self.name, self.args, self.target)
        elif isinstance(config, int):
            config = self.config_space.get(config)
        return self._run(config)

    def _run(self, cfg):
        with self.target:
            return _run_with_config(self.template.func, self.args, cfg)

    def seed_tasks(self) -> list:
        """The tasks of the workloads whose configs are points of this task's space
        (:meth:`Template.seeds`): their records are candidates worth measuring first."""
        return [_cached_task(name, args, self.target)
                for name, args in self.template.seeds(self.args, self.target)]

    @property
    def label(self) -> str:
        """The workload in one line, for summaries (:meth:`Template.label`)."""
        return self.template.label(self.args)

    def __repr__(self):
        return f"Task({self.name!r}, args={self.args}, target={str(self.target)!r})"


def create_task(name: str, args, target: Target | str = "llvm") -> Task:
    """The tuning task of template ``name`` on ``args`` for ``target``.

    Parameters
    ----------
    name : str
        A registered template (the built-in ones are registered by ``tecomp.topi``).
    args : tuple
        The template's arguments (defaults are filled in).
    target : Target or str
        The target the template runs under (``with target:``, so it can read
        ``Target.current()``) and whose records apply; its string keys the log.

    Returns
    -------
    Task

    Raises
    ------
    TemplateError
        If no template is registered under ``name`` or it fails on ``args``.
    """
    task = Task(name, args, target)
    task.config_space  # noqa: B018 - fail here, with the template's error, not mid-tuning
    return task
