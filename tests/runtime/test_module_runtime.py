"""Runtime modules: argument validation, timing, export_library / load_module."""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "codegen"))

from cg_helpers import buf, build, ld, loop, split_vectorized  # noqa: E402

import tecomp  # noqa: E402
from tecomp.ir import PrimFunc, Store, Var  # noqa: E402


@pytest.fixture(scope="module")
def mm():
    """C[n, m] = A[n, k] + B[k, m][0, :] style function with symbolic n, m and fixed 4."""
    n, m = Var("n"), Var("m")
    A, B, C = buf("A", (n, 4)), buf("B", (4, m)), buf("C", (n, m))
    i, j = Var("i"), Var("j")
    body = loop(i, n, loop(j, m, Store(C, ld(A, i * 4) + ld(B, j), i * m + j)))
    return build(PrimFunc("f", (A, B, C), body))


def _args(n=3, m=5):
    return (np.ones((n, 4), np.float32), np.ones((4, m), np.float32),
            np.zeros((n, m), np.float32))


def test_valid_call_binds_symbolic_sizes(mm, rng):
    a, b = rng.random((3, 4), dtype=np.float32), rng.random((4, 5), dtype=np.float32)
    c = np.zeros((3, 5), np.float32)
    mm(a, b, c)
    np.testing.assert_array_equal(c, a[:, :1] + b[:1, :])
    a, b, c = _args(1, 1)
    mm["f"](a, b, c)
    assert c.tolist() == [[2.0]]


def test_wrong_number_of_arguments(mm):
    a, b, c = _args()
    with pytest.raises(TypeError, match="takes 3 arguments"):
        mm(a, b)


def test_not_an_ndarray(mm):
    a, b, c = _args()
    with pytest.raises(TypeError, match=r"argument 1 \('B'\).*numpy.ndarray.*list"):
        mm(a, b.tolist(), c)


def test_wrong_dtype(mm):
    a, b, c = _args()
    with pytest.raises(TypeError, match=r"argument 0 \('A'\).*dtype float32.*float64"):
        mm(a.astype(np.float64), b, c)


def test_wrong_rank(mm):
    a, b, c = _args()
    with pytest.raises(ValueError, match=r"argument 2 \('C'\).*2 dimensions"):
        mm(a, b, c.reshape(-1))


def test_wrong_constant_dimension(mm):
    a, b, c = _args()
    with pytest.raises(ValueError, match=r"argument 0 \('A'\).*size 4 in dimension 1, got 3"):
        mm(np.ones((3, 3), np.float32), b, c)


def test_inconsistent_symbolic_size(mm):
    a, b, c = _args(3, 5)
    with pytest.raises(ValueError, match=r"argument 2 \('C'\).*'n' is already 3.*'A'"):
        mm(a, b, np.zeros((4, 5), np.float32))


def test_non_contiguous(mm):
    a, b, c = _args(3, 5)
    big = np.zeros((3, 10), np.float32)
    with pytest.raises(ValueError, match=r"argument 2 \('C'\).*C-contiguous"):
        mm(a, b, big[:, ::2])


def test_read_only_output(mm):
    a, b, c = _args()
    c.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \('C'\).*read-only"):
        mm(a, b, c)


def test_read_only_input_is_fine(mm):
    a, b, c = _args()
    a.flags.writeable = False
    mm(a, b, c)
    assert (c == 2).all()


def test_output_overlapping_input_is_rejected():
    mod = build(split_vectorized(lambda a, b: a + b))
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match=r"'A'.*'C'.*share memory"):
        mod(x, np.ones(8, np.float32), x)


def test_shape_expression_of_symbolic_size():
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (n + 2,))
    i = Var("i")
    mod = build(PrimFunc("pad", (A, C), loop(i, n, Store(C, ld(A, i), i + 1))))
    c = np.zeros(7, np.float32)
    mod(np.ones(5, np.float32), c)
    assert c.tolist() == [0, 1, 1, 1, 1, 1, 0]
    with pytest.raises(ValueError, match=r"argument 1 \('C'\).*\(n \+ 2\) = 7.*got 6"):
        mod(np.ones(5, np.float32), np.zeros(6, np.float32))


def test_errors_are_tecomp_errors(mm):
    with pytest.raises(tecomp.TecompError):
        mm(1, 2, 3)


def test_missing_function_name(mm):
    with pytest.raises(KeyError, match="has no function 'g'.*f"):
        mm["g"]


def test_get_source_formats(mm):
    assert "define" in mm.get_source("ll")
    assert "tecomp_f" in mm.get_source("asm")
    with pytest.raises(ValueError, match="'ll', 'asm'"):
        mm.get_source("cuda")


def test_time_evaluator(mm):
    res = mm.time_evaluator(number=3, repeat=4, warmup_ms=1)(*_args())
    assert len(res.results) == 4
    assert all(r > 0 for r in res.results)
    assert res.mean > 0 and res.median > 0
    res = mm.time_evaluator("f", number=1, repeat=1, min_repeat_ms=2, warmup_ms=0)(*_args())
    assert res.results[0] > 0


def test_time_evaluator_validates_arguments(mm):
    with pytest.raises(TypeError, match="takes 3 arguments"):
        mm.time_evaluator(warmup_ms=0)(np.zeros(1))


def test_export_is_elf_shared_object_and_loads(mm, tmp_path):
    path = str(tmp_path / "f.so")
    mm.export_library(path)
    with open(path, "rb") as fh:
        head = fh.read(18)
    assert head[:4] == b"\x7fELF"
    assert int.from_bytes(head[16:18], "little") == 3  # ET_DYN
    mod = tecomp.runtime.load_module(path)
    a, b, c = _args(2, 3)
    mod(a, b, c)
    assert (c == 2).all()
    # the embedded metadata keeps every check
    with pytest.raises(ValueError, match=r"argument 2 \('C'\).*'n' is already 2"):
        mod(a, b, np.zeros((3, 3), np.float32))
    with pytest.raises(TypeError, match="dtype float32"):
        mod(a.astype(np.int32), b, c)


def test_exported_parallel_module_runs(tmp_path, rng):
    n = Var("n")
    A, C = buf("A", (n,)), buf("C", (n,))
    i = Var("i")
    f = PrimFunc("p", (A, C), loop(i, n, Store(C, ld(A, i) * 2.0, i), "parallel"))
    path = str(tmp_path / "p.so")
    build(f).export_library(path)
    mod = tecomp.runtime.load_module(path)
    a = rng.random(1000, dtype=np.float32)
    c = np.empty(1000, np.float32)
    mod(a, c)
    np.testing.assert_array_equal(c, a * 2)


def test_load_module_rejects_other_files(tmp_path):
    p = tmp_path / "x.so"
    p.write_bytes(b"not an elf file")
    with pytest.raises(tecomp.TecompError, match="not an ELF"):
        tecomp.runtime.load_module(str(p))
    with pytest.raises(FileNotFoundError):
        tecomp.runtime.load_module(str(tmp_path / "missing.so"))


def test_build_accepts_target_object_and_rejects_bad_target():
    f = split_vectorized(lambda a, b: a + b)
    mod = tecomp.build(f, target=tecomp.Target("llvm"))
    assert "llvm" in str(mod.target)
    a, b, c = np.arange(5, dtype=np.float32), np.ones(5, np.float32), np.zeros(5, np.float32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + 1)
    with pytest.raises(tecomp.TargetError, match="unknown target kind 'foo'"):
        tecomp.build(f, target="foo")


def test_loading_an_exported_library_needs_no_llvm(mm, tmp_path):
    path = str(tmp_path / "f.so")
    mm.export_library(path)
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import tecomp.runtime
        mod = tecomp.runtime.load_module({path!r})
        a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
        c = np.zeros((3, 5), np.float32)
        mod(a, b, c)
        mod["f"].call_trusted(a, b, c)
        try:
            mod(a, b, c[:2])
        except ValueError as err:
            print("checked:", err)
        print("sum", float(c.sum()), "llvmlite loaded", "llvmlite" in sys.modules)
        print("codegen loaded", any(m.startswith("tecomp.codegen") for m in sys.modules))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "checked: argument 2 ('C')" in r.stdout
    assert "sum 30.0 llvmlite loaded False" in r.stdout
    assert "codegen loaded False" in r.stdout


def test_loaded_module_parses_its_target_when_read(mm, tmp_path):
    path = str(tmp_path / "f.so")
    mm.export_library(path)
    mod = tecomp.runtime.load_module(path)
    assert isinstance(mod, tecomp.runtime.LibraryModule)
    assert mod.target == mm.target
    with pytest.raises(tecomp.TecompError, match="loaded from the shared library.*machine code"):
        mod.get_source("ll")
    copy = str(tmp_path / "g.so")
    mod.export_library(copy)
    a, b, c = _args(2, 2)
    tecomp.runtime.load_module(copy)(a, b, c)
    assert (c == 2).all()


def test_call_trusted_gives_the_checked_result(mm, rng):
    n, m = 6, 7
    a = rng.random((n, 4), dtype=np.float32)
    b = rng.random((4, m), dtype=np.float32)
    checked, trusted = np.zeros((n, m), np.float32), np.zeros((n, m), np.float32)
    mm(a, b, checked)
    mm.get_function("f").call_trusted(a, b, trusted)
    np.testing.assert_array_equal(trusted, checked)
    np.testing.assert_allclose(checked, a[:, :1] + b[:1, :])  # C[i, j] = A[i*4] + B[j]


def test_a_prepared_call_reuses_its_arguments_and_follows_a_new_pointer(mm, rng):
    a, a2 = (rng.random((6, 4), dtype=np.float32) for _ in range(2))
    b = rng.random((4, 7), dtype=np.float32)
    c = np.zeros((6, 7), np.float32)
    call = mm.get_function("f").prepare(a, b, c)
    call()
    np.testing.assert_allclose(c, a[:, :1] + b[:1, :])
    call.set_pointer(0, a2)
    call()
    np.testing.assert_allclose(c, a2[:, :1] + b[:1, :])


def test_a_prepared_call_keeps_its_arrays_alive(mm, rng):
    a = rng.random((6, 4), dtype=np.float32)
    b = rng.random((4, 7), dtype=np.float32)
    c = np.zeros((6, 7), np.float32)
    call = mm.get_function("f").prepare(a.copy(), b.copy(), c)
    gc.collect()  # the copies have no other owner than the call
    _ = [np.full(a.shape, np.nan, np.float32) for _ in range(64)]  # reuse freed memory
    call()
    np.testing.assert_allclose(c, a[:, :1] + b[:1, :])
    fresh = rng.random((6, 4), dtype=np.float32)
    call.set_pointer(0, fresh.copy())
    gc.collect()
    call()
    np.testing.assert_allclose(c, fresh[:, :1] + b[:1, :])


def test_a_cuda_module_file_goes_to_the_cuda_loader_imported_when_met(tmp_path):
    # Loading shared libraries imports no CUDA support; a file in the CUDA module format
    # brings in its loader (and a damaged one is its error, not "not an ELF file").
    from tecomp.runtime.cuda_module import BUNDLE_MAGIC

    path = tmp_path / "damaged.cuda"
    path.write_bytes(BUNDLE_MAGIC + b"{not json\n")
    code = textwrap.dedent(f"""
        import sys
        import tecomp, tecomp.runtime
        print("before", "tecomp.runtime.cuda_module" in sys.modules)
        try:
            tecomp.runtime.load_module({str(path)!r})
        except tecomp.TecompError as err:
            print(err)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "before False" in r.stdout
    assert "is not a readable CUDA module" in r.stdout
