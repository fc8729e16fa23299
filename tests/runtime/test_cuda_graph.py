"""Device memory for whole models (tecomp.runtime.cuda_graph): views and their
``__cuda_array_interface__``, the simulator's memory, which memory a module gets, and —
with a recording stand-in for the driver — that a model's constants are uploaded once,
a run allocates nothing for input shapes seen before, and a cubin the GPU refuses is
loaded from its PTX."""

import numpy as np
import pytest

from tecomp.errors import TargetError
from tecomp.runtime import cuda_graph, cuda_module
from tecomp.runtime.args import ArgumentError
from tecomp.runtime.cuda_driver import CUDAError
from tecomp.runtime.cuda_graph import DeviceView, SimulatedCUDAMemory, device_memory


def test_a_view_of_a_view_offsets_its_address_and_keeps_its_owner():
    owner = object()
    base = DeviceView(4096, (8,), np.dtype("float32"), owner)
    part = base.view(16, (2, 2), "float32")
    assert part.ptr == 4112 and part.owner is owner and part.nbytes == 16
    cai = part.__cuda_array_interface__
    assert cai["shape"] == (2, 2) and cai["typestr"] == "<f4" and cai["data"] == (4112, False)


def test_a_strided_device_array_is_refused():
    class Strided:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "data": (1024, False),
                                    "strides": (4, 16), "version": 3}

    with pytest.raises(ArgumentError, match="not C-contiguous"):
        cuda_graph.CUDAMemory.external(Strided())


def test_simulated_memory_views_share_the_arena():
    memory = SimulatedCUDAMemory(module=None)
    arena = memory.arena(64)
    a = memory.view(arena, 0, (4,), "float32")
    b = memory.view(arena, 16, (2, 2), "float32")
    memory.write(a, np.arange(4, dtype="float32"))
    memory.write(b, np.ones((2, 2), "float32"))
    assert memory.read(a).tolist() == [0, 1, 2, 3]
    assert np.frombuffer(arena, "float32", count=8)[4:].tolist() == [1, 1, 1, 1]
    assert memory.external(np.zeros(2)) is None


def test_a_loaded_module_cannot_be_simulated():
    class Loaded:
        _simulator = None

    with pytest.raises(TargetError, match="loaded from a file"):
        device_memory(Loaded(), simulate=True)


class RecordingDriver:
    """Counts allocations, copies, launches and graph replays; loading a cubin fails as
    on a GPU of another architecture, the PTX loads. With ``refuse_capture`` a capture
    fails as the driver's does for work it cannot record."""

    def __init__(self, refuse_capture=False):
        self.allocs, self.uploads, self.launches, self.loaded = 0, 0, 0, []
        self.device_copies, self.captured, self.replays, self.events = 0, [], 0, 0
        self.refuse_capture = refuse_capture
        self.next = 1 << 20

    def alloc(self, nbytes):  # 256-byte aligned, as cuMemAlloc's
        self.allocs += 1
        self.next += -(-max(nbytes, 1) // 256) * 256 + 256
        return self.next

    def free(self, ptr): pass

    def to_device(self, ptr, array):
        self.uploads += 1

    def to_host(self, array, ptr): pass
    def copy(self, dst, src, nbytes): pass
    def synchronize(self, what): pass
    def zero_async(self, ptr, nbytes, stream): pass

    def copy_async(self, dst, src, nbytes, stream):
        self.device_copies += 1

    def new_stream(self):
        return "stream"

    def destroy_stream(self, stream): pass

    def capture(self, stream, queue):
        launches = self.launches
        queue()
        if self.refuse_capture:
            raise CUDAError("cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
        self.captured.append(self.launches - launches)
        return f"graph {len(self.captured)}"

    def replay(self, graph_exec, stream):
        self.replays += 1

    def destroy_graph(self, graph_exec): pass

    def load_module(self, image):
        if image.startswith(b"\x7fELF"):  # the cubin
            raise CUDAError("cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU")
        self.loaded.append(image)
        return "module"

    def get_function(self, module, name):
        return name

    def unload_module(self, module): pass

    def destroy_event(self, event):
        self.events -= 1

    def launch(self, func, name, grid, block, args, stream=0, shared=0):
        self.launches += 1

    def event(self):
        self.events += 1
        return object()

    def record(self, event): pass

    def elapsed_seconds(self, start, end):
        return 1e-3


def _layer_norm_on_a_recording_driver(cuda_target, monkeypatch, **options):
    """A layer-norm model built for cuda and run on a :class:`RecordingDriver`
    (``options`` for it): ``(driver, library, module)``."""
    import onnx_models
    from tecomp.frontend import from_onnx
    from tecomp.graph import build
    from tecomp.graph.device_executor import DeviceGraphModule

    fake = RecordingDriver(**options)
    monkeypatch.setattr(cuda_graph, "driver", lambda: fake)
    monkeypatch.setattr(cuda_module, "driver", lambda: fake)
    mod, params = from_onnx(onnx_models.decomposed_layer_norm())
    lib = build(mod, target=cuda_target, params=params)
    return fake, lib, DeviceGraphModule(lib, simulate=False)


def test_constants_once_and_no_allocation_per_run(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch)
    constants = fake.uploads
    assert constants == fake.allocs == len([k for k in gm._consts])
    x = np.ones((3, 16), "float32")
    gm(x=x)
    allocs = fake.allocs
    assert allocs == constants + 1  # the arena of this input shape
    assert fake.loaded[0].endswith(b"\0") and b".entry" in fake.loaded[0]  # the PTX
    gm(x=x)
    assert fake.allocs == allocs  # nothing allocated for a shape seen before
    assert fake.uploads == constants + 2  # each run copies its input in, nothing else
    gm(x=np.ones((5, 16), "float32"))
    assert fake.allocs == allocs + 1  # a new input shape: one more arena
    assert fake.launches == 3 * len(lib.kernels)


def test_profile_times_each_kernel_with_events_on_its_device_values(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch)
    gm.set_input("x", np.ones((3, 16), "float32"))
    gm.run()
    allocs = fake.allocs
    times = gm.profile(number=4, repeat=2)
    assert [name for name, _ in times] == [n.name for n in gm._kernel_nodes]
    assert all(len(t.results) == 2 for _, t in times)
    # The kernels read the run's device values in place: no argument is copied.
    assert fake.allocs == allocs
    assert fake.events == 0  # every timing event destroyed


def test_a_plans_launches_are_recorded_once_and_replayed(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch)
    kernels = len(lib.kernels)
    x = np.ones((3, 16), "float32")
    gm(x=x)
    assert (fake.launches, fake.captured, fake.replays) == (kernels, [], 0)  # one by one
    gm(x=x)
    assert fake.captured == [kernels] and fake.replays == 1  # recorded, then replayed
    gm(x=x)
    gm(x=x)
    assert fake.launches == 2 * kernels and fake.replays == 3  # replays launch nothing
    allocs = fake.allocs
    gm(x=np.ones((5, 16), "float32"))  # a new plan starts one by one again
    assert fake.launches == 3 * kernels and fake.allocs == allocs + 1


def test_a_replay_copies_device_inputs_into_their_slots(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch)
    x = DeviceView(1 << 40, (3, 16), np.dtype("float32"), owner=None)
    monkeypatch.setattr(cuda_graph.CUDAMemory, "external", staticmethod(lambda v: v))
    gm(x=x)
    assert fake.device_copies == 0  # read in place
    gm(x=x)
    gm(x=x)
    assert fake.device_copies == 2 and fake.replays == 2


def test_launches_the_driver_cannot_record_run_one_by_one(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch,
                                                      refuse_capture=True)
    x = np.ones((3, 16), "float32")
    for _ in range(4):
        gm(x=x)
    kernels = len(lib.kernels)
    # The refused recording queued its launches; they ran one by one after it, as every
    # later run does without trying to record again.
    assert fake.replays == 0 and fake.launches == 5 * kernels


def test_graph_replay_off_launches_every_kernel_every_run(cuda_target, monkeypatch):
    fake, lib, gm = _layer_norm_on_a_recording_driver(cuda_target, monkeypatch)
    gm.graph_replay = False
    for _ in range(3):
        gm(x=np.ones((3, 16), "float32"))
    assert fake.launches == 3 * len(lib.kernels) and fake.replays == 0
