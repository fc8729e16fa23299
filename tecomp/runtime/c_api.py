"""The C interface of exported libraries: a header for C programs and the function table
every exported library carries.

A library written by ``export_library`` can be used from C without Python in two ways:

- **Linked**, through the header ``header_text`` generates (``Module.export_header``):
  it declares each entry point ``int32_t tecomp_<name>(void **args, int64_t *sizes)``
  (``tecomp.runtime.abi``) and a typed wrapper ``tecomp_call_<name>(A, B, C, n)`` taking
  one pointer per buffer parameter, then one ``int64_t`` per symbolic size.
- **Loaded** with ``dlopen``: the symbol ``tecomp_module_info`` (a ``tecomp_module_t``,
  which the code generator emits beside the functions, so object files have it too)
  lists the functions with their entry points and argument metadata (names, dtypes,
  element sizes, dimensions, which buffers are written), so a generic loader such as
  the runner's ``tecomp_run`` calls any function by name.

Every function returns 0, -1 when a temporary buffer could not be allocated, or
``TECOMP_CHECK_FAILED`` (-2) when a run-time check failed (an index out of range, an
integer division by zero): its ``sizes`` array holds the size values and then the call's
error record (``TECOMP_ERROR_RECORD_SLOTS`` entries, ``tecomp.runtime.abi``), which
``tecomp_check_message`` turns into text with the function's check messages from the
table. The typed wrappers allocate the record themselves and keep the last failure's text
for ``tecomp_last_error()`` (per thread). The caller passes C-contiguous buffers of the
documented shapes; generated code does not check bounds unless it was built with
``check_bounds``.
"""

from __future__ import annotations

import keyword

from .abi import CHECK_FAILED, ERROR_RECORD_SLOTS, FunctionSignature

#: Version of the C structures below; bumped whenever their layout changes (2: functions
#: list their check messages, ``sizes`` ends with the error record).
C_ABI_VERSION = 2

#: Name of the ``tecomp_module_t`` every exported library defines.
MODULE_INFO_SYMBOL = "tecomp_module_info"

_C_TYPES = {
    "float16": "uint16_t",  # IEEE half, stored as its 16 bits (C has no portable half type)
    "bfloat16": "uint16_t",  # the high 16 bits of a float
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
    "bool": "uint8_t",  # one byte per element, 0 or 1, as numpy stores it
}

_C_KEYWORDS = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false",
})

ABI_TYPES = f"""\
#ifndef TECOMP_ABI_TYPES
#define TECOMP_ABI_TYPES
#include <stdio.h>
#include <string.h>
#define TECOMP_C_ABI_VERSION {C_ABI_VERSION}
#define TECOMP_ERROR_RECORD_SLOTS {ERROR_RECORD_SLOTS}
#define TECOMP_CHECK_FAILED ({CHECK_FAILED})

/* Every entry point: one data pointer per buffer parameter; one value per symbolic size,
   then the call's error record (TECOMP_ERROR_RECORD_SLOTS zeros: the id of the failed
   check + 1, the value it reported). Returns 0, -1 when a temporary buffer could not be
   allocated, TECOMP_CHECK_FAILED when a run-time check failed (see the record). */
typedef int32_t (*tecomp_packed_fn)(void **args, int64_t *sizes);

typedef struct tecomp_param {{
  const char *name;
  const char *dtype;         /* numpy dtype name: "float32", "int8", "float16", ... */
  int32_t itemsize;          /* bytes per element */
  int32_t ndim;
  const int64_t *dims;       /* each dimension, or -1 where it depends on the sizes */
  const char *const *shape;  /* each dimension as text: "64", "n", "(n + 2)" */
  int32_t output;            /* 1 if the function writes this buffer */
}} tecomp_param;

typedef struct tecomp_function {{
  const char *name;
  tecomp_packed_fn fn;
  int32_t num_params;
  const tecomp_param *params;
  int32_t num_sizes;
  const char *const *size_names;  /* in the order the sizes array holds them */
  int32_t num_checks;
  const char *const *checks;      /* run-time check messages, by id - 1 ("{{value}}":
                                     where the reported value goes) */
}} tecomp_function;

typedef struct tecomp_module_t {{
  int32_t abi_version;             /* TECOMP_C_ABI_VERSION of the library */
  const char *target;              /* the target string it was built for */
  int32_t num_functions;
  const tecomp_function *functions;
  const char *metadata_json;       /* the same description as JSON (tecomp.runtime.abi) */
}} tecomp_module_t;

/* "kernel 'NAME': MESSAGE" of a failed check, "{{value}}" replaced by the value, from the
   error record (the TECOMP_ERROR_RECORD_SLOTS entries after the size values) of a call
   of `kernel` whose messages are `checks`; written to out (n bytes with the NUL). */
static inline const char *tecomp_format_check(const char *kernel, int32_t num_checks,
                                              const char *const *checks,
                                              const int64_t *record, char *out, size_t n) {{
  if (n == 0) return out;
  int64_t id = record[0];
  int k = snprintf(out, n, "kernel '%s': ", kernel);
  if (k < 0 || (size_t)k >= n) return out;
  if (id < 1 || id > num_checks) {{
    snprintf(out + k, n - k, "run-time check %lld failed with the value %lld",
             (long long)(id - 1), (long long)record[1]);
    return out;
  }}
  const char *m = checks[id - 1], *hole = strstr(m, "{{value}}");
  if (!hole) {{
    snprintf(out + k, n - k, "%s", m);
  }} else {{
    snprintf(out + k, n - k, "%.*s%lld%s", (int)(hole - m), m, (long long)record[1],
             hole + 7);
  }}
  return out;
}}

/* The same for a function of a library's table. */
static inline const char *tecomp_check_message(const tecomp_function *fn,
                                               const int64_t *record, char *out, size_t n) {{
  return tecomp_format_check(fn->name, fn->num_checks, fn->checks, record, out, n);
}}

/* This thread's text of the last failed check a typed wrapper saw ("" if none). */
static inline char *tecomp_last_error_buffer(void) {{
  static __thread char text[512];
  return text;
}}
static inline const char *tecomp_last_error(void) {{ return tecomp_last_error_buffer(); }}
#endif
"""


def c_type(dtype: str) -> str:
    """The C element type of a buffer of numpy dtype ``dtype`` (``void`` if C has none)."""
    return _C_TYPES.get(dtype, "void")


def _identifiers(names) -> list:
    """C identifiers for ``names``: invalid characters replaced, keywords and repeats
    suffixed, so every parameter of a wrapper gets a distinct legal name."""
    out, seen = [], set()
    for name in names:
        ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "arg"
        if ident[0].isdigit():
            ident = "_" + ident
        if ident in _C_KEYWORDS or keyword.iskeyword(ident):
            ident += "_"
        base, k = ident, 1
        while ident in seen:
            ident, k = f"{base}_{k}", k + 1
        seen.add(ident)
        out.append(ident)
    return out


def _wrapper(sig: FunctionSignature) -> str:
    names = _identifiers([p.name for p in sig.params] + list(sig.size_vars))
    pnames, snames = names[:len(sig.params)], names[len(sig.params):]
    decls = [
        f"{'' if p.output else 'const '}{c_type(p.dtype)} *{n}"
        for p, n in zip(sig.params, pnames)
    ] + [f"int64_t {n}" for n in snames]
    written = [p.name for p in sig.params if p.output]
    sizes = ", ".join(snames + ["0"] * ERROR_RECORD_SLOTS)
    fname = _identifiers([sig.name])[0]
    n = len(snames)
    return (
        f"/* {sig.name}({sig}); writes {', '.join(written) or 'nothing'}.\n"
        f"   Returns 0, -1 (no memory) or TECOMP_CHECK_FAILED (tecomp_last_error()). */\n"
        f"int32_t {sig.symbol}(void **args, int64_t *sizes);\n"
        f"static inline int32_t tecomp_call_{fname}({', '.join(decls) or 'void'}) {{\n"
        f"  void *args[{max(len(pnames), 1)}] = {{"
        f"{', '.join(f'(void *){n}' for n in pnames) or '0'}}};\n"
        f"  int64_t sizes[{n + ERROR_RECORD_SLOTS}] = {{{sizes}}};\n"
        f"  int32_t rc = {sig.symbol}(args, sizes);\n"
        f"  if (rc == TECOMP_CHECK_FAILED)\n"
        f"    tecomp_format_check({_c_string(sig.name)}, {len(sig.checks)}, "
        f"{_c_string_array(sig.checks)}, sizes + {n}, tecomp_last_error_buffer(), 512);\n"
        f"  return rc;\n"
        f"}}\n"
    )


def _c_string(text: str) -> str:
    """``text`` as a C string literal (non-ASCII and specials as octal escapes)."""
    out = []
    for b in text.encode():
        c = chr(b)
        out.append(c if 32 <= b < 127 and c not in '"\\?' else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _c_string_array(texts) -> str:
    """A compound literal of C strings, or a null pointer when there are none."""
    if not texts:
        return "(const char *const *)0"
    return "(const char *const[]){" + ", ".join(_c_string(t) for t in texts) + "}"


def header_text(signatures, target: str, guard: str = "TECOMP_MODULE_H") -> str:
    """A C header declaring a module's functions, typed wrappers and the table types.

    Parameters
    ----------
    signatures : iterable of FunctionSignature
    target : str
        The target string the module was built for (named in a comment).
    guard : str
        The include guard macro.

    Examples
    --------
    >>> print(header_text(mod.signatures, str(mod.target)))   # doctest: +SKIP
    """
    guard = _identifiers([guard.upper()])[0]
    body = "\n".join(_wrapper(s) for s in signatures)
    return (
        f"/* Generated by tecomp for target \"{target}\". C ABI version {C_ABI_VERSION}.\n"
        f"   Buffers are C-contiguous arrays of the shapes given; outputs must not overlap\n"
        f"   other arguments. The library also defines {MODULE_INFO_SYMBOL} (for dlopen). */\n"
        f"#ifndef {guard}\n#define {guard}\n#include <stdint.h>\n\n"
        f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n"
        f"{ABI_TYPES}\n"
        f"extern const tecomp_module_t {MODULE_INFO_SYMBOL};\n\n"
        f"{body}\n"
        f"#ifdef __cplusplus\n}}\n#endif\n#endif\n"
    )
