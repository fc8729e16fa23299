"""Code generators: loop IR (PrimFunc) -> machine code for a target.

``llvm.build_llvm`` handles CPU targets (x86-64, AArch64) through llvmlite.
"""


def build_llvm(funcs, target="llvm"):
    from .llvm import build_llvm as _build

    return _build(funcs, target)


__all__ = ["build_llvm"]
