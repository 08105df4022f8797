"""CUDA C++: the kernels of ``impls/<op>/*.cu``, built into one PyTorch extension library
(build: once per machine and source hash, cached), launched through ``torch.ops.harness_cuda``
on the current PyTorch stream, their launch configurations chosen by harness.tuner (launch).

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
        from harness import progress
        from impls._frameworks.cuda import build
        try:
            if not build.sources():
                return "no CUDA sources under impls/"
            progress.phase("building the CUDA kernels (once per source hash; kept in the cache)")
            build.load()
        except build.BuildError as e:
            return str(e)
        return None

    def settings(self):
        from impls._frameworks.cuda import build
        loaded = build.loaded()   # the library this process runs, not the sources on disk now
        return {"build": loaded.parent.name if loaded else build.build_hash(), "arch": build.arch(),
                "flags": " ".join(build.FLAGS)}
