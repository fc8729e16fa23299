"""Function signatures and the metadata a module carries: encode, decode, evaluate."""

import json

import pytest

from tecomp.errors import RuntimeCheckError, TecompError
from tecomp.runtime.abi import (
    METADATA_VERSION,
    FunctionSignature,
    ParamSpec,
    decode_metadata,
    encode_metadata,
    eval_size,
    spec_str,
)

SIG = FunctionSignature(
    name="pad",
    symbol="tecomp_pad",
    size_vars=("n", "m"),
    params=(
        ParamSpec("A", "float32", ("n", 4), False),
        ParamSpec("B", "int8", ("m",), False),
        ParamSpec("C", "float32", (("+", "n", 2), ("min", "m", 8)), True),
    ),
)


def test_round_trip_keeps_every_field():
    data = encode_metadata("llvm -mcpu=haswell", [SIG])
    assert data.endswith(b"\0") and data.count(b"\0") == 1
    target, sigs = decode_metadata(data)
    assert target == "llvm -mcpu=haswell"
    assert sigs == [SIG]


def test_format_is_the_documented_json():
    doc = json.loads(encode_metadata("llvm", [SIG])[:-1])
    assert doc["version"] == METADATA_VERSION == 2
    assert doc["funcs"][0]["checks"] == []
    assert doc["funcs"][0]["params"][2] == {
        "name": "C", "dtype": "float32", "shape": [["+", "n", 2], ["min", "m", 8]],
        "output": True,
    }


def test_other_versions_and_garbage_are_errors():
    doc = json.loads(encode_metadata("llvm", [SIG])[:-1])
    doc["version"] = 99
    with pytest.raises(TecompError, match="version 99.*reads versions 1, 2"):
        decode_metadata(json.dumps(doc).encode())
    with pytest.raises(TecompError, match="not readable"):
        decode_metadata(b"\xff\xfe")


def test_version_1_metadata_still_loads_as_functions_without_checks():
    doc = json.loads(encode_metadata("llvm", [SIG])[:-1])
    doc["version"] = 1
    del doc["funcs"][0]["checks"]
    _, sigs = decode_metadata(json.dumps(doc).encode())
    assert sigs == [SIG] and sigs[0].checks == ()


def test_error_record_names_the_function_check_and_value():
    sig = FunctionSignature("Gather_3", "tecomp_Gather_3", (), (),
                            checks=("integer division by zero",
                                    "index {value} is out of range for axis 0 of size 5"))
    assert sig.check_error([0, 0]) is None
    err = sig.check_error([2, 7])
    assert isinstance(err, RuntimeCheckError) and isinstance(err, ValueError)
    assert str(err) == "kernel 'Gather_3': index 7 is out of range for axis 0 of size 5"
    assert (err.kernel, err.value) == ("Gather_3", 7)
    assert "check 4 failed with the value -1" in str(sig.check_error([5, -1]))


def test_sizes_evaluate_and_print():
    env = {"n": 5, "m": 20}
    assert [eval_size(s, env) for s in SIG.params[2].shape] == [7, 8]
    assert eval_size(("//", "n", 0), env) is None
    assert eval_size(("*", "k", 2), env) is None
    assert [spec_str(s) for s in SIG.params[2].shape] == ["(n + 2)", "min(m, 8)"]
    assert str(SIG) == "A: float32[n, 4], B: int8[m], C: float32[(n + 2), min(m, 8)]"


def test_size_sources_name_the_first_binding_dimension():
    assert SIG.size_sources() == ((0, 0), (1, 0))
