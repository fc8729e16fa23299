"""Loop IR: expressions, statements, buffers, functions, and the passes over them."""

from . import dtype, printer
from .buffer import Buffer, make_buffer
from .expr import *  # noqa: F401,F403
from .functor import IRMutator, collect_vars, post_order_visit, substitute, uses_var
from .stmt import (
    FOR_KINDS,
    Allocate,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Store,
    seq,
)
