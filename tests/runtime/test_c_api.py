"""The C interface of exported libraries: the generated header compiles and its typed
wrappers call the functions; the function table describes them as the metadata does."""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import tecomp
from tecomp import te
from tecomp.runtime.abi import FunctionSignature, ParamSpec
from tecomp.runtime.c_api import header_text

pytestmark = pytest.mark.usefixtures("needs_llvm")

CC = shutil.which("cc") or shutil.which("gcc")


class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("itemsize", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("shape", ctypes.POINTER(ctypes.c_char_p)), ("output", ctypes.c_int32)]


class _Function(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("fn", ctypes.c_void_p),
                ("num_params", ctypes.c_int32), ("params", ctypes.POINTER(_Param)),
                ("num_sizes", ctypes.c_int32), ("size_names", ctypes.POINTER(ctypes.c_char_p)),
                ("num_checks", ctypes.c_int32), ("checks", ctypes.POINTER(ctypes.c_char_p))]


class _Module(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_int32), ("target", ctypes.c_char_p),
                ("num_functions", ctypes.c_int32), ("functions", ctypes.POINTER(_Function)),
                ("metadata_json", ctypes.c_char_p)]


def _scaled_rows(name="scale"):
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    w = te.placeholder((3,), dtype="int32", name="int")  # a C keyword as parameter name
    B = te.compute((n + 1, 3), lambda i, j: te.if_then_else(
        i < n, A[te.min(i, n - 1), j] * w[j].astype("float32"), 0.0), name="B")
    return tecomp.build(te.create_schedule(B.op), [A, w, B], name=name)


def test_function_table_describes_the_functions(tmp_path):
    mod = _scaled_rows()
    path = mod.export_library(str(tmp_path / "scale.so"))
    lib = ctypes.CDLL(path)
    info = _Module.in_dll(lib, "tecomp_module_info")
    assert info.abi_version == 2 and info.num_functions == 1
    assert info.target.decode() == str(mod.target)
    f = info.functions[0]
    assert f.name == b"scale" and f.num_params == 3 and f.num_sizes == 1
    assert f.size_names[0] == b"n" and f.num_checks == 0
    a, w, b = (f.params[i] for i in range(3))
    assert (a.name, a.dtype, a.itemsize, a.ndim, a.output) == (b"A", b"float32", 4, 2, 0)
    assert (w.name, w.dtype, w.itemsize, w.dims[0]) == (b"int", b"int32", 4, 3)
    assert [b.dims[0], b.dims[1]] == [-1, 3] and b.output == 1
    assert [b.shape[0], b.shape[1]] == [b"(n + 1)", b"3"]
    assert f.fn == ctypes.cast(lib.tecomp_scale, ctypes.c_void_p).value
    assert b'"name": "scale"' in info.metadata_json


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_header_wrapper_calls_the_library(tmp_path):
    mod = _scaled_rows()
    mod.export_library(str(tmp_path / "scale.so"))
    header = mod.export_header(str(tmp_path / "scale.h"))
    with open(header) as fh:
        text = fh.read()
    assert "#ifndef TECOMP_SCALE_H" in text
    assert "tecomp_call_scale(const float *A, const int32_t *int_, float *B, int64_t n)" in text
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "scale.h"\n#include "scale.h"\n'  # guarded twice
        "int main(void) {\n"
        "  float a[6] = {1, 2, 3, 4, 5, 6}, b[9];\n  int32_t w[3] = {1, -2, 3};\n"
        "  if (tecomp_call_scale(a, w, b, 2) != 0) return 1;\n"
        '  for (int i = 0; i < 9; i++) printf("%g ", b[i]);\n'
        "  return tecomp_module_info.functions[0].num_params == 3 ? 0 : 2;\n}\n")
    subprocess.run([CC, "-Wall", "-Werror", "-o", "main", "main.c", "scale.so",
                    "-Wl,-rpath,$ORIGIN"], cwd=tmp_path, check=True)
    out = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, check=True)
    got = np.array(out.stdout.split(), dtype="float32")
    want = np.vstack([np.arange(1, 7, dtype="float32").reshape(2, 3) * [1, -2, 3],
                      np.zeros((1, 3), "float32")]).ravel()
    np.testing.assert_array_equal(got, want)


def test_header_names_are_legal_and_distinct():
    sig = FunctionSignature("my-op", "tecomp_my_op", ("n",), (
        ParamSpec("x.in", "float16", ("n",), False),
        ParamSpec("x_in", "bool", ("n",), False),
        ParamSpec("n", "float64", ("n",), True),
    ))
    text = header_text([sig], "llvm", "OP_H")
    assert ("tecomp_call_my_op(const uint16_t *x_in, const uint8_t *x_in_1, double *n, "
            "int64_t n_1)") in text
    assert "int64_t sizes[3] = {n_1, 0, 0};" in text  # the sizes, then the error record


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_header_of_a_module_with_several_functions_compiles(tmp_path):
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    fa = tecomp.lower(s, [A, B], name="inc")
    fb = tecomp.lower(s, [A, B], name="inc2")
    from tecomp.codegen.llvm import build_llvm

    mod = build_llvm([fa, fb], target="llvm")
    mod.export_header(str(tmp_path / "two.h"))
    (tmp_path / "t.c").write_text('#include "two.h"\nint main(void) { return 0; }\n')
    subprocess.run([CC, "-Wall", "-Werror", "-fsyntax-only", "t.c"], cwd=tmp_path, check=True)
    assert os.path.getsize(tmp_path / "two.h") > 0


def _gather(name="gather"):
    A = te.placeholder((5,), name="A")
    idx = te.placeholder((4,), dtype="int64", name="I")

    def f(j):
        ok = te.checked((idx[j] >= 0) & (idx[j] < 5), idx[j],
                        "index {value} is out of range for axis 0 of size 5")
        return te.if_then_else(ok, A[idx[j]], 0.0)

    B = te.compute((4,), f, name="B")
    return tecomp.build(te.create_schedule(B.op), [A, idx, B], name=name)


def test_function_table_lists_the_check_messages(tmp_path):
    path = _gather().export_library(str(tmp_path / "gather.so"))
    f = _Module.in_dll(ctypes.CDLL(path), "tecomp_module_info").functions[0]
    assert f.num_checks == 1
    assert f.checks[0] == b"index {value} is out of range for axis 0 of size 5"


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_header_wrapper_reports_a_failed_check(tmp_path):
    mod = _gather()
    mod.export_library(str(tmp_path / "gather.so"))
    mod.export_header(str(tmp_path / "gather.h"))
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "gather.h"\n'
        "int main(void) {\n"
        "  float a[5] = {1, 2, 3, 4, 5}, b[4];\n  int64_t ok[4] = {4, 0, 1, 2};\n"
        "  int64_t bad[4] = {0, 9, -1, 2};\n"
        "  if (tecomp_call_gather(a, ok, b) != 0) return 1;\n"
        '  printf("%g %s|", b[0], tecomp_last_error());\n'
        "  int rc = tecomp_call_gather(a, bad, b);\n"
        '  printf("%d %g %g %s\\n", rc == TECOMP_CHECK_FAILED, b[1], b[3], '
        "tecomp_last_error());\n"
        "  return 0;\n}\n")
    subprocess.run([CC, "-Wall", "-Werror", "-o", "main", "main.c", "gather.so",
                    "-Wl,-rpath,$ORIGIN"], cwd=tmp_path, check=True)
    out = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == ("5 |1 0 3 kernel 'gather': index 9 is out of range for axis 0 "
                          "of size 5\n")


def test_bfloat16_is_its_bits_in_c():
    sig = FunctionSignature("f", "tecomp_f", ("n",), (
        ParamSpec("x", "bfloat16", ("n",), False), ParamSpec("y", "float32", ("n",), True)))
    assert "tecomp_call_f(const uint16_t *x, float *y, int64_t n)" in header_text(
        [sig], "llvm", "F_H")
