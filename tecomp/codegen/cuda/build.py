"""``build_cuda``: lowered PrimFuncs -> a ``CUDAModule`` (CUDA C, PTX, cubin, launch plans)."""

from __future__ import annotations

from ...errors import CodegenError, TargetError
from ...ir import stmt as S
from ...ir.analysis import buffer_key
from ...ir.interpreter import run
from ...runtime.abi import function_signature, size_spec
from ...runtime.cuda_driver import device_arch
from ...runtime.cuda_module import CUDAModule
from ...target import as_target
from .nvrtc import compile_cuda
from .source import translate


def launch_plan(func: S.PrimFunc) -> tuple:
    """(the plan steps of ``func``'s host part, its ``KernelLaunch`` nodes in order).

    Raises
    ------
    CodegenError
        When the host part holds anything but global allocations and kernel launches
        (lowering for a cuda target produces nothing else).
    """
    params = {buffer_key(b): i for i, b in enumerate(func.params)}
    steps, launches = [], []

    def ref(b):
        i = params.get(buffer_key(b))
        return {"param": i} if i is not None else {"temp": b.name}

    def walk(s):
        if isinstance(s, S.SeqStmt):
            for c in s.seq:
                walk(c)
        elif isinstance(s, S.Allocate) and s.buffer.scope == "global":
            size = s.buffer.shape[0]
            for d in s.buffer.shape[1:]:
                size = size * d
            steps.append({"op": "alloc", "name": s.buffer.name, "dtype": s.buffer.dtype,
                          "size": size_spec(size)})
            walk(s.body)
        elif isinstance(s, S.KernelLaunch):
            launches.append(s)
            steps.append({
                "op": "launch", "kernel": s.name,
                "grid": [size_spec(g) for g in s.grid],
                "block": [size_spec(b) for b in s.block],
                "buffers": [ref(b) for b in s.params],
                "scalars": [[v.name, v.dtype] for v in s.scalars],
            })
        else:
            raise CodegenError(
                f"{func.name}: the host part of a CUDA function can only allocate global "
                f"buffers and launch kernels, but holds a {type(s).__name__}; was it "
                f"lowered for a cuda target?")

    walk(func.body)
    return steps, launches


def _arch(target) -> str:
    if "-arch=" in str(target):
        return target.arch
    return device_arch() or target.arch


def build_cuda(funcs, target="cuda") -> CUDAModule:
    """Compile PrimFuncs lowered for a CUDA target.

    Parameters
    ----------
    funcs : PrimFunc or list of PrimFunc
    target : Target or str
        Its ``-arch`` selects the cubin's architecture; without one, the GPU's of this
        machine, or ``sm_90`` when there is none.

    Returns
    -------
    CUDAModule
        Its sources; callable where a GPU is present, ``simulate`` everywhere.

    Raises
    ------
    CodegenError
        For IR the generator cannot emit, or CUDA C NVRTC rejects (with its log).
    """
    target = as_target(target)
    if target.kind != "cuda":
        raise TargetError(f"build_cuda needs a cuda target, got {target}")
    if isinstance(funcs, S.PrimFunc):
        funcs = [funcs]
    names = [f.name for f in funcs]
    if len(set(names)) != len(names):
        raise CodegenError(f"two functions share a name in one module: {names}")
    plans, launches, checks, checks_of = {}, [], {}, {}
    for f in funcs:
        function_signature(f)  # rejects unbindable sizes before any code is emitted
        plans[f.name], ls = launch_plan(f)
        launches.extend(ls)
        checks[f.name] = []  # the function's check messages, shared by its kernels
        checks_of.update({k.name: checks[f.name] for k in ls})
    arch = _arch(target)
    doubled = frozenset().union(*(f.attrs.get("double_buffered", ()) for f in funcs))
    source, recorded, alignments, dynamic_shared = translate(launches, checks_of, arch,
                                                             doubled)
    for f in funcs:
        for step in plans[f.name]:
            if step["op"] != "launch":
                continue
            if step["kernel"] in recorded:
                step["record"] = True  # the kernel takes the error record last
            if step["kernel"] in dynamic_shared:
                step["shared"] = dynamic_shared[step["kernel"]]
            for i, nbytes in alignments[step["kernel"]].items():
                step["buffers"][i]["align"] = nbytes  # read or written as vectors
    signatures = [function_signature(f, checks[f.name]) for f in funcs]
    cubin, ptx = compile_cuda(source, arch)
    by_name = {f.name: f for f in funcs}

    def simulate(name, *arrays):
        run(by_name[name], *arrays)

    return CUDAModule(target, signatures, plans, cubin, {"cuda": source, "ptx": ptx},
                      simulate)
