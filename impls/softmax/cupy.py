"""CuPy softmax over the last dim; 2·R·C·s bytes.
  idiomatic:  ReductionKernels for each row's max and sum of exp(x - max), then an
              ElementwiseKernel for the output: three kernels, x read three times.
  three_pass: the CUDA extension's kernels (softmax.cuh) through NVRTC, a group of threads per
              row, 16-byte packs: the max, the sum of exp, the output, x read three times (the
              later reads mostly from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged in the group's tree: x
              read twice.
  on_chip:    the row kept in registers: x read once.
The group (and so the bits) is tuned per row length and dtype, packs and block per batch."""
from harness.registry import impl
from impls._frameworks.cupy import idiomatic, rows


@impl("softmax", "cupy", variant="idiomatic")
def bind_idiomatic(x, out):
    largest = idiomatic.max_of("ld(x)", "harness_softmax_max")
    total = idiomatic.sum_of("expf(ld(x) - m)", "harness_softmax_sum", params="X x, float32 m")
    write = idiomatic.elementwise("X x, float32 m, float32 s", "X y", "y = st<X>(expf(ld(x) - m) / s)",
                                  "harness_softmax_write")

    def compute(v, y):
        m = largest(v["x"], axis=1, keepdims=True)
        write(v["x"], m, total(v["x"], m, axis=1, keepdims=True), y)
    return idiomatic.launcher(compute, {"x": x}, out, "2 ReductionKernels + ElementwiseKernel")


VARIANTS = {"three_pass": "THREE_PASS", "online": "ONLINE", "on_chip": "ON_CHIP"}   # softmax.cuh's names


def _register(variant: str, code: str):
    @impl("softmax", "cupy", variant=variant)
    def bind(x, out):
        on_chip = variant == "on_chip"
        return rows.row_launcher("softmax", ("softmax", variant), f"softmax {variant}",
                                 f"hk::softmax_rows<{{T}}, {{P}}, {{TRIP}}, hk::{code}, {{W}}>", (x, out), (),
                                 weights=0, kept=on_chip, looped=not on_chip)
    return bind


for _variant, _code in VARIANTS.items():
    _register(_variant, _code)
