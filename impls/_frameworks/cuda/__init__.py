"""CUDA C++: the kernels of ``impls/<op>/*.cu``, built into one PyTorch extension library
(build: once per machine and source hash, cached), launched through ``torch.ops.harness_cuda``
on the current PyTorch stream, their launch configurations from this GPU's table or the framework's rule (harness.launch.configs).

Modules: build (the library), launch (grids and the tuned 1-D launchers), rows (the row
kernels' configs); the device helpers all kernels share are in device.cuh (fp32 conversions,
16-byte packs, warp and block reductions), elementwise.cuh, reduce_1d.cuh and rows.cuh, torch-free
so that CuPy's raw variants compile them too; host.cuh is the extension's host side."""
from harness.registry import OURS, Framework


class Cuda(Framework):
    name = "cuda"
    role = OURS

    def unusable(self, device):
        if device.type != "cuda":
            return ("the CUDA C++ kernels run on an NVIDIA GPU only (on a CPU the tests compile their sources "
                    "with nvcc, without running them)")
        from impls._frameworks.cuda import build
        try:
            if not build.sources():
                return "no CUDA sources under impls/"
            build.kept(None)   # the build's hash: the architectures given, and nvcc's version
        except build.BuildError as e:
            return str(e)
        return None

    def warm(self, device, cases):
        """The build (58 s cold on the H200's 16 cores) starts with the run, in a thread of the
        harness's process, while the other frameworks' cases run; nvcc and ninja use the CPU
        only. A failed build makes every CUDA case a skipped one naming it (build.BuildError)."""
        from impls._frameworks.cuda import build
        return build.start()

    def ready(self):
        from impls._frameworks.cuda import build
        return build.started_is_over()

    def settings(self):
        from impls._frameworks.cuda import build
        loaded = build.loaded()   # the library this process runs, not the sources on disk now
        return {"build": loaded.parent.name if loaded else build.build_hash(), "arch": build.arch(),
                "flags": " ".join(build.FLAGS)}
