"""The C entry point of a whole model: generated C source that runs a built graph's
kernels without Python, and the header C programs include to call it.

``GraphLibrary.export_library`` compiles the source :func:`model_source` writes with the
target's C compiler and links it into the kernels' shared object, so that one file is the
whole model for C:

- ``int32_t tecomp_model_run(const void *const *inputs, const int64_t *const *input_shapes,
  void *const *outputs, int64_t *const *output_shapes)``: one data pointer and one shape
  array per graph input, in graph order; one data pointer and one shape array (written)
  per graph output. Symbolic dimensions are bound from the input shapes and every input
  dimension is checked against them, as are the shape conditions type inference left
  to run time (``tecomp.graph.checks``); intermediates live in one arena allocated per call
  (their offsets planned from the bound sizes, values whose lifetimes do not overlap share
  bytes, as ``GraphModule`` plans them; a reshape is a view of its source's bytes, and
  the inputs of a concatenation computed in place are slices of its output); each kernel
  is called through its C entry point (``tecomp.runtime.abi``).
- ``int32_t tecomp_model_output_shapes(const int64_t *const *input_shapes,
  int64_t *const *output_shapes)``: the output shapes for given input shapes, so a caller
  can size the output buffers before a run (the run does not know their capacity).
- ``tecomp_model_info``: a ``tecomp_model_t`` naming the inputs and outputs with their
  dtypes and shapes (``tecomp_param``, ``tecomp.runtime.c_api``; dimensions that depend on
  symbols are -1, their text names them) and the symbols.

Both functions return ``TECOMP_MODEL_OK`` (0), ``TECOMP_MODEL_ENOMEM`` (-1: the arena or
a kernel's temporary buffer could not be allocated), ``TECOMP_MODEL_ESHAPE`` (-2: the
input shapes are inconsistent with each other or with the graph) or, from a run,
``TECOMP_MODEL_ECHECK`` (-3: a run-time check of a kernel failed, e.g. a Gather index out
of range or an integer division by zero; ``tecomp_model_last_error()`` then gives this
thread's message, ``kernel 'Gather_3': index 7 is out of range for axis 0 of size 5``,
and the run stopped after that kernel). The constants (weights,
packed weights) are a data blob in the library's read-only data, assembled from a binary
file with ``.incbin``, so the shared object needs no side file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TecompError
from ..ir import expr as E
from ..runtime.abi import ERROR_RECORD_SLOTS
from ..runtime.c_api import (
    ABI_TYPES,
    C_ABI_VERSION,
    _c_string_array,
    _identifiers,
    c_type,
)
from . import dims
from .checks import runtime_dim_checks
from .ir import Graph
from .storage import buffer_lifetimes, is_view, value_homes

#: Arena and constant offsets are multiples of this (a cache line, the widest vector).
ALIGNMENT = 64

MODEL_INFO_SYMBOL = "tecomp_model_info"

_CONSTANTS_SYMBOL = "tecomp_model_constants"

MODEL_TYPES = """\
#ifndef TECOMP_MODEL_TYPES
#define TECOMP_MODEL_TYPES
#define TECOMP_MODEL_OK 0
#define TECOMP_MODEL_ENOMEM (-1)  /* the arena or a kernel's temporary buffer */
#define TECOMP_MODEL_ESHAPE (-2)  /* input shapes inconsistent with the graph or each other */
#define TECOMP_MODEL_ECHECK (-3)  /* a kernel's run-time check failed: tecomp_model_last_error */

/* One data pointer and one shape array per input (read) and per output (shape written). */
typedef int32_t (*tecomp_model_run_fn)(const void *const *inputs,
                                       const int64_t *const *input_shapes,
                                       void *const *outputs, int64_t *const *output_shapes);
/* The output shapes for given input shapes, without running. */
typedef int32_t (*tecomp_model_shapes_fn)(const int64_t *const *input_shapes,
                                          int64_t *const *output_shapes);

typedef struct tecomp_model_t {
  int32_t abi_version;             /* TECOMP_C_ABI_VERSION of the library */
  const char *name;                /* the graph's name */
  const char *target;              /* the target string it was built for */
  int32_t num_inputs;
  const tecomp_param *inputs;      /* in the order tecomp_model_run takes them */
  int32_t num_outputs;
  const tecomp_param *outputs;
  int32_t num_symbols;
  const char *const *symbols;      /* the symbolic dimensions, bound from the inputs */
  tecomp_model_shapes_fn output_shapes;
  tecomp_model_run_fn run;
} tecomp_model_t;
#endif
"""

_PROTOTYPES = """\
int32_t tecomp_model_run(const void *const *inputs, const int64_t *const *input_shapes,
                         void *const *outputs, int64_t *const *output_shapes);
int32_t tecomp_model_output_shapes(const int64_t *const *input_shapes,
                                   int64_t *const *output_shapes);
/* This thread's message of the last run that returned TECOMP_MODEL_ECHECK. */
const char *tecomp_model_last_error(void);
"""

# The text behind tecomp_model_last_error, one per thread as runs may be concurrent.
_LAST_ERROR = """\
static __thread char tecomp_model_error[512];
const char *tecomp_model_last_error(void) { return tecomp_model_error; }
"""

# Integer helpers the dimension expressions call: floor division and modulo as in Python.
_HELPERS = """\
static inline int64_t tecomp_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tecomp_floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t tecomp_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tecomp_max(int64_t a, int64_t b) { return a > b ? a : b; }
"""

# The arena plan of tecomp.graph.executor.plan_offsets, in C: largest buffers first, each
# at the lowest aligned offset beside the placed buffers alive at the same time.
_PLANNER = """\
static int64_t tecomp_plan(const int64_t *size, const int32_t *first, const int32_t *last,
                           int64_t *offset) {
  int32_t order[TECOMP_MODEL_VALUES];
  int64_t lo[TECOMP_MODEL_VALUES], hi[TECOMP_MODEL_VALUES];
  int64_t total = 0;
  for (int32_t i = 0; i < TECOMP_MODEL_VALUES; ++i) {
    int32_t j = i;
    for (; j > 0 && size[order[j - 1]] < size[i]; --j) order[j] = order[j - 1];
    order[j] = i;
  }
  for (int32_t k = 0; k < TECOMP_MODEL_VALUES; ++k) {
    int32_t i = order[k], m = 0;
    int64_t off = 0;
    for (int32_t p = 0; p < k; ++p) {
      int32_t j = order[p];
      if (last[j] < first[i] || last[i] < first[j]) continue;
      int32_t q = m++;
      for (; q > 0 && (lo[q - 1] > offset[j] ||
                       (lo[q - 1] == offset[j] && hi[q - 1] > offset[j] + size[j])); --q) {
        lo[q] = lo[q - 1];
        hi[q] = hi[q - 1];
      }
      lo[q] = offset[j];
      hi[q] = offset[j] + size[j];
    }
    for (int32_t q = 0; q < m; ++q) {
      int64_t end = (hi[q] + TECOMP_ALIGNMENT - 1) / TECOMP_ALIGNMENT * TECOMP_ALIGNMENT;
      if (off + size[i] <= lo[q]) break;
      if (end > off) off = end;
    }
    offset[i] = off;
    if (off + size[i] > total) total = off + size[i];
  }
  return total;
}
"""


class ModelExportError(TecompError):
    """A graph cannot be given a C entry point; the message names the value and why."""


def _c_comment(text: str) -> str:
    """``text`` safe inside a C comment (a model's node names are arbitrary strings)."""
    return text.replace("*/", "* /")


def _c_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


@dataclass(frozen=True)
class _Symbols:
    """The graph's symbolic dimensions, each bound by the first input dimension that is
    that symbol alone."""

    vars: tuple
    sources: tuple  # (input index, dimension) per symbol

    def index(self, var) -> int:
        for k, v in enumerate(self.vars):
            if v is var:
                return k
        raise ModelExportError(f"symbol {var.name!r} is no dimension of an input by itself, "
                               "so the model's inputs cannot bind it")

    def c_expr(self, d) -> str:
        """Dimension ``d`` as a C ``int64_t`` expression over the bound symbols ``s[k]``."""
        d = dims.normalize(d)
        if dims.is_static(d):
            return f"INT64_C({d})"
        if isinstance(d, E.Var):
            return f"s[{self.index(d)}]"
        a, b = self.c_expr(d.a), self.c_expr(d.b)
        infix = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
        if type(d) in infix:
            return f"({a} {infix[type(d)]} {b})"
        call = {E.FloorDiv: "tecomp_floordiv", E.FloorMod: "tecomp_floormod",
                E.Min: "tecomp_min", E.Max: "tecomp_max"}
        if type(d) in call:
            return f"{call[type(d)]}({a}, {b})"
        raise ModelExportError(f"dimension {d}: {type(d).__name__} has no C form; allowed "
                               "are symbols, integers, + - * // % min max")


def _symbols(graph: Graph) -> _Symbols:
    found, sources = [], []
    for i, name in enumerate(graph.inputs):
        for axis, d in enumerate(graph.types[name].shape):
            if isinstance(d, E.Var) and not any(d is v for v in found):
                found.append(d)
                sources.append((i, axis))
    return _Symbols(tuple(found), tuple(sources))


def _shape_of(graph: Graph, value: str) -> tuple:
    if value in graph.types:
        return tuple(graph.types[value].shape)
    return graph.consts[value].shape


def _dtype_of(graph: Graph, value: str) -> np.dtype:
    if value in graph.types:
        return np.dtype(graph.types[value].dtype)
    return graph.consts[value].dtype


def _bytes(graph: Graph, syms: _Symbols, value: str, shape=None) -> str:
    """The bytes of ``value`` (or of ``shape`` elements of its dtype) as a C expression."""
    shape = _shape_of(graph, value) if shape is None else shape
    return syms.c_expr(dims.normalize(dims.product(shape) * _dtype_of(graph, value).itemsize))


def constant_offsets(graph: Graph) -> dict:
    """Where each constant starts in the constants blob: its C-contiguous native bytes
    follow one another, each at a multiple of ``ALIGNMENT``."""
    offsets, size = {}, 0
    for name, array in graph.consts.items():
        size += -size % ALIGNMENT
        offsets[name] = size
        size += array.nbytes
    return offsets


def write_constants(graph: Graph, path: str) -> None:
    """Write the constants blob :func:`model_source` assembles into the library."""
    with open(path, "wb") as fh:
        for name, offset in constant_offsets(graph).items():
            fh.write(b"\0" * (offset - fh.tell()))
            fh.write(np.ascontiguousarray(graph.consts[name]).tobytes())


def _param_table(graph: Graph, names, var: str, output: bool) -> list:
    """C definitions of a ``tecomp_param`` array ``var`` describing graph values."""
    lines, entries = [], []
    for k, name in enumerate(names):
        t = graph.types[name]
        shape = tuple(t.shape)
        dim_vals = ", ".join(str(d) if dims.is_static(d) else "-1" for d in shape) or "0"
        texts = ", ".join(_c_string(dims.to_text(d)) for d in shape) or "0"
        lines.append(f"static const int64_t {var}_dims_{k}[] = {{{dim_vals}}};")
        lines.append(f"static const char *const {var}_shape_{k}[] = {{{texts}}};")
        entries.append(f"  {{{_c_string(name)}, {_c_string(t.dtype)}, "
                       f"{np.dtype(t.dtype).itemsize}, {len(shape)}, {var}_dims_{k}, "
                       f"{var}_shape_{k}, {int(output)}}},")
    lines.append(f"static const tecomp_param {var}[] = {{")
    lines += entries or ["  {0, 0, 0, 0, 0, 0, 0},"]
    lines.append("};")
    return lines


class _Writer:
    """Builds the body of ``tecomp_model_run``: where each value lives and each call."""

    def __init__(self, graph: Graph, signatures: dict, syms: _Symbols, const_offsets: dict):
        self.graph, self.signatures, self.syms = graph, signatures, syms
        self.const_offsets = const_offsets
        self.kernel_nodes = [n for n in graph.nodes if not is_view(n)]
        self.homes = value_homes(graph)
        # Outputs a kernel writes go straight to the caller's buffer (the first output
        # slot naming the value); the other intermediates share the arena.
        self.out_slot = {}
        for k, name in enumerate(graph.outputs):
            self.out_slot.setdefault(name, k)
        self.computed = {n.outputs[0] for n in self.kernel_nodes}
        self.inter = [(v, first, last) for v, (first, last) in buffer_lifetimes(graph).items()
                      if v not in self.out_slot]
        self.inter_index = {v: j for j, (v, _, _) in enumerate(self.inter)}

    def pointer(self, value: str) -> str:
        """A C ``unsigned char *`` expression for where ``value``'s data is (a view's is
        in its root's, see ``tecomp.graph.storage.value_homes``)."""
        g = self.graph
        value, within = self.homes.get(value, (value, 0))
        if value in self.inter_index:
            return f"(arena + offset[{self.inter_index[value]}] + {within})"
        if value in self.out_slot and value in self.computed:
            return f"((unsigned char *)outputs[{self.out_slot[value]}])"
        if value in g.inputs:
            return f"((unsigned char *)inputs[{g.inputs.index(value)}])"
        if value in self.const_offsets:
            return f"((unsigned char *){_CONSTANTS_SYMBOL} + {self.const_offsets[value]})"
        raise ModelExportError(f"value {value!r} is neither an input, a constant nor computed "
                               "by a kernel")

    def call(self, node) -> list:
        """The C statements calling ``node``'s kernel."""
        g, syms = self.graph, self.syms
        sig = self.signatures[node.name]
        values = list(node.inputs) + [node.outputs[0]]
        sizes = []
        for param, axis in sig.size_sources():
            sizes.append(syms.c_expr(_shape_of(g, values[param])[axis]))
        # The size values, then the call's error record.
        size_init = ", ".join(sizes + ["0"] * ERROR_RECORD_SLOTS)
        ops = " -> ".join(n.op for n in node.attrs["body"].nodes)
        head = [f"  /* {node.name}: {ops} */", "  {"]
        args = ", ".join(f"(void *){self.pointer(v)}" for v in values)
        failed = []
        if sig.checks:
            failed = ["    if (rc == TECOMP_CHECK_FAILED) {",
                      f"      tecomp_format_check({_c_string(sig.name)}, {len(sig.checks)}, "
                      f"{_c_string_array(sig.checks)}, sizes + {len(sizes)},",
                      "                          tecomp_model_error, sizeof tecomp_model_error);",
                      "      rc = TECOMP_MODEL_ECHECK;", "    }"]
        return head + [f"    void *args[] = {{{args}}};",
                       f"    int64_t sizes[] = {{{size_init}}};",
                       f"    rc = {sig.symbol}(args, sizes);"] + failed + [
                       "    if (rc != TECOMP_MODEL_OK) goto done;", "  }"]

    def passthrough(self) -> list:
        """Copies for outputs no kernel writes into their slot: inputs, constants, and a
        value named by more than one output."""
        g, lines = self.graph, []
        for k, name in enumerate(g.outputs):
            if name in self.computed and self.out_slot[name] == k:
                continue
            lines.append(f"  memcpy(outputs[{k}], {self.pointer(name)}, "
                         f"(size_t){_bytes(g, self.syms, name)});")
        return lines


def _shapes_function(graph: Graph, syms: _Symbols) -> list:
    """``tecomp_model_bind``: bind the symbols, check every input dimension and the shape
    conditions left to run time (``tecomp.graph.checks``), write the output shapes."""
    lines = ["static int32_t tecomp_model_bind(const int64_t *const *input_shapes, int64_t *s,",
             "                                 int64_t *const *output_shapes) {"]
    for k, (i, axis) in enumerate(syms.sources):
        lines.append(f"  s[{k}] = input_shapes[{i}][{axis}];  /* {syms.vars[k].name} */")
    for i, name in enumerate(graph.inputs):
        for axis, d in enumerate(graph.types[name].shape):
            lines.append(f"  if (input_shapes[{i}][{axis}] < 0 || "
                         f"input_shapes[{i}][{axis}] != {syms.c_expr(d)}) "
                         "return TECOMP_MODEL_ESHAPE;")
    for check in runtime_dim_checks(graph):
        lines.append(f"  if ({check.c_violation(syms.c_expr)}) "
                     f"return TECOMP_MODEL_ESHAPE;  /* {_c_comment(check.where())} */")
    for k, name in enumerate(graph.outputs):
        for axis, d in enumerate(graph.types[name].shape):
            lines.append(f"  output_shapes[{k}][{axis}] = {syms.c_expr(d)};")
    # (A graph without symbols, inputs or outputs leaves a parameter unread.)
    lines += ["  (void)s;", "  (void)input_shapes;", "  (void)output_shapes;",
              "  return TECOMP_MODEL_OK;", "}", "",
              "int32_t tecomp_model_output_shapes(const int64_t *const *input_shapes,",
              "                                   int64_t *const *output_shapes) {",
              f"  int64_t s[{max(len(syms.vars), 1)}];",
              "  return tecomp_model_bind(input_shapes, s, output_shapes);", "}"]
    return lines


def _run_function(graph: Graph, writer: _Writer, syms: _Symbols) -> list:
    n = len(writer.inter)
    lines = ["int32_t tecomp_model_run(const void *const *inputs, "
             "const int64_t *const *input_shapes,",
             "                         void *const *outputs, int64_t *const *output_shapes) {",
             f"  int64_t s[{max(len(syms.vars), 1)}];",
             "  int32_t rc = tecomp_model_bind(input_shapes, s, output_shapes);",
             "  unsigned char *arena = 0;",
             "  if (rc != TECOMP_MODEL_OK) return rc;"]
    if n:
        firsts = ", ".join(str(first) for _, first, _ in writer.inter)
        lasts = ", ".join(str(last) for _, _, last in writer.inter)
        # Python's plan gives every buffer at least one byte; so does this one.
        sizes = ", ".join(f"tecomp_max({_bytes(graph, syms, v)}, 1)" for v, _, _ in writer.inter)
        lines += [f"  static const int32_t first[{n}] = {{{firsts}}};",
                  f"  static const int32_t last[{n}] = {{{lasts}}};",
                  f"  const int64_t size[{n}] = {{{sizes}}};",
                  f"  int64_t offset[{n}];",
                  "  int64_t total = tecomp_plan(size, first, last, offset);",
                  "  if (posix_memalign((void **)&arena, TECOMP_ALIGNMENT, (size_t)total) != 0)",
                  "    return TECOMP_MODEL_ENOMEM;"]
    for node in writer.kernel_nodes:
        lines += writer.call(node)
    lines += writer.passthrough()
    lines += ["  (void)inputs;  /* unread in a graph without inputs or outputs */",
              "  (void)outputs;", "done:", "  free(arena);", "  return rc;", "}"]
    return lines


def model_source(graph: Graph, signatures, target: str, constants_path: str | None) -> str:
    """The C source of a graph's model entry point.

    Parameters
    ----------
    graph : Graph
        A built graph (``GraphLibrary.graph``): a kernel call per fused node, views.
    signatures : iterable of FunctionSignature
        The kernels' entry points (``GraphLibrary.module.signatures``).
    target : str
        The target string (recorded in ``tecomp_model_info``).
    constants_path : str or None
        The file :func:`write_constants` wrote, assembled into the library's read-only
        data; None when the graph has no constants.

    Returns
    -------
    str

    Raises
    ------
    ModelExportError
        A symbolic dimension is bound by no input dimension of its own, or a value has no
        source.
    """
    syms = _symbols(graph)
    by_name = {s.name: s for s in signatures}
    writer = _Writer(graph, by_name, syms, constant_offsets(graph))
    lines = [f"/* Generated by tecomp: the model entry point of graph {graph.name!r} for "
             f"target \"{target}\". */",
             "#define _POSIX_C_SOURCE 200112L  /* posix_memalign */",
             "#include <stdint.h>", "#include <stdlib.h>", "#include <string.h>", "",
             ABI_TYPES, MODEL_TYPES, _PROTOTYPES,
             f"#define TECOMP_ALIGNMENT {ALIGNMENT}",
             f"#define TECOMP_MODEL_VALUES {max(len(writer.inter), 1)}", "", _HELPERS,
             _LAST_ERROR]
    if writer.inter:
        lines.append(_PLANNER)
    lines += [f"int32_t {by_name[n.name].symbol}(void **args, int64_t *sizes);"
              for n in writer.kernel_nodes]
    if constants_path is not None:
        # Hidden: the library's own code reads it PC-relative, and it is no export.
        lines += ["", f"extern const unsigned char {_CONSTANTS_SYMBOL}[] "
                  "__attribute__((visibility(\"hidden\")));",
                  f"__asm__(\".section .rodata\\n.balign {ALIGNMENT}\\n"
                  f".globl {_CONSTANTS_SYMBOL}\\n.hidden {_CONSTANTS_SYMBOL}\\n"
                  f"{_CONSTANTS_SYMBOL}:\\n.incbin \\\"{constants_path}\\\"\\n.previous\\n\");"]
    lines += [""] + _shapes_function(graph, syms) + [""] + _run_function(graph, writer, syms)
    lines += [""] + _param_table(graph, graph.inputs, "tecomp_model_inputs", False)
    lines += _param_table(graph, graph.outputs, "tecomp_model_outputs", True)
    names = ", ".join(_c_string(v.name) for v in syms.vars) or "0"
    lines += [f"static const char *const tecomp_model_symbols[] = {{{names}}};",
              f"const tecomp_model_t {MODEL_INFO_SYMBOL} = {{",
              f"  {C_ABI_VERSION}, {_c_string(graph.name)}, {_c_string(target)},",
              f"  {len(graph.inputs)}, tecomp_model_inputs,",
              f"  {len(graph.outputs)}, tecomp_model_outputs,",
              f"  {len(syms.vars)}, tecomp_model_symbols,",
              "  tecomp_model_output_shapes, tecomp_model_run,", "};", ""]
    return "\n".join(lines)


def _signature_comment(graph: Graph, names) -> str:
    """``x: float32[N, 3]`` for each value of ``names``."""
    return ", ".join(
        f"{n}: {graph.types[n].dtype}[{', '.join(map(dims.to_text, graph.types[n].shape))}]"
        for n in names)


def model_header(graph: Graph, target: str, guard: str = "TECOMP_MODEL_H") -> str:
    """A C header declaring a model's entry points, its info table and a typed wrapper
    ``tecomp_model_call(input, input_shape, ..., output, output_shape, ...)``.

    Parameters
    ----------
    graph : Graph
    target : str
        The target string the model was built for (named in a comment).
    guard : str
        The include guard macro.

    Examples
    --------
    >>> print(model_header(lib.graph, str(lib.target)))   # doctest: +SKIP
    """
    guard = _identifiers([guard.upper()])[0]
    names = _identifiers(list(graph.inputs) + list(graph.outputs))
    ins, outs = names[:len(graph.inputs)], names[len(graph.inputs):]
    params = ([f"const {c_type(graph.types[n].dtype)} *{c}, const int64_t *{c}_shape"
               for n, c in zip(graph.inputs, ins)] +
              [f"{c_type(graph.types[n].dtype)} *{c}, int64_t *{c}_shape"
               for n, c in zip(graph.outputs, outs)])

    def array(names, suffix=""):
        return ", ".join(f"{c}{suffix}" for c in names) or "0"

    wrapper = (
        f"/* Inputs {_signature_comment(graph, graph.inputs)};\n"
        f"   outputs {_signature_comment(graph, graph.outputs)}. */\n"
        f"static inline int32_t tecomp_model_call({', '.join(params) or 'void'}) {{\n"
        f"  const void *inputs[{max(len(ins), 1)}] = {{{array(ins)}}};\n"
        f"  const int64_t *input_shapes[{max(len(ins), 1)}] = {{{array(ins, '_shape')}}};\n"
        f"  void *outputs[{max(len(outs), 1)}] = {{{array(outs)}}};\n"
        f"  int64_t *output_shapes[{max(len(outs), 1)}] = {{{array(outs, '_shape')}}};\n"
        f"  return tecomp_model_run(inputs, input_shapes, outputs, output_shapes);\n"
        f"}}\n"
    )
    return (
        f"/* Generated by tecomp: the C entry point of model {graph.name!r}, target "
        f"\"{target}\".\n"
        f"   C ABI version {C_ABI_VERSION}. Size the outputs with tecomp_model_output_shapes\n"
        f"   before tecomp_model_run; buffers are C-contiguous and must not overlap. */\n"
        f"#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n\n"
        f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n"
        f"{ABI_TYPES}\n{MODEL_TYPES}\n{_PROTOTYPES}"
        f"extern const tecomp_model_t {MODEL_INFO_SYMBOL};\n\n{wrapper}\n"
        f"#ifdef __cplusplus\n}}\n#endif\n#endif\n"
    )
