"""A fake CUDA driver for the measuring process, for tests of GPU tuning without a GPU."""

import os
import textwrap

#: Imported by the measuring process at start-up: replaces the driver the CUDA module
#: calls. Every process writes its pid to PIDS; with FAULT set, the first
#: synchronization after a launch fails as an illegal address does on a real GPU.
_SITECUSTOMIZE = textwrap.dedent('''
    import os
    from tecomp.runtime import cuda_module
    from tecomp.runtime.cuda_driver import CUDAError

    with open(os.environ["TECOMP_TEST_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")


    class FakeDriver:
        def __init__(self):
            self.launched = []
            self.next = 1 << 20

        def alloc(self, nbytes):  # aligned as cuMemAlloc's (kernels' vector accesses)
            self.next += 1 << 12
            return self.next

        def free(self, ptr): pass
        def to_device(self, ptr, array): pass
        def to_host(self, array, ptr): pass
        def zero_async(self, ptr, nbytes, stream): pass
        def load_module(self, cubin): return "module"
        def unload_module(self, module): pass
        def destroy_event(self, event): pass
        def get_function(self, module, name): return name
        def event(self): return object()
        def record(self, event): pass
        def elapsed_seconds(self, start, end): return 1e-3

        def launch(self, func, name, grid, block, args, stream=0, shared=0):
            self.launched.append(name)

        def synchronize(self, what):
            if os.environ.get("TECOMP_TEST_FAULT") and self.launched:
                raise CUDAError(f"{what} failed: CUDA_ERROR_ILLEGAL_ADDRESS")


    _driver = FakeDriver()
    cuda_module.driver = lambda: _driver
''')


def install(tmp_path, monkeypatch):
    """Make every measuring process started from now on (in this test) use the fake
    driver; returns the file each such process writes its pid to."""
    (tmp_path / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    pids = tmp_path / "pids"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("TECOMP_TEST_PIDS", str(pids))
    return pids
