"""CUDA scale (scale.cu): y = a·x in fp32, rounded once; 2·N·s bytes.
  naive: one element per thread, a scalar load and store each: few bytes in flight per
         thread, so the memory system idles between requests.
  tuned: the seed's scale4: 16-byte packs, four independent loads in flight per thread, a
         grid-stride loop; the grid is tuned."""
from harness.registry import impl
from impls._frameworks._launch import configured
from impls._frameworks.cuda import build
from impls._frameworks.cuda.launch import NAIVE_THREADS, blocks_for, chosen, with_grid


@impl("scale", "cuda", variant="naive")
def bind_naive(x, a, out):
    ops = build.load()
    return configured(lambda: ops.scale(x, a, out, True, NAIVE_THREADS, 1),
                      {"threads": NAIVE_THREADS, "elements_per_thread": 1})


@impl("scale", "cuda", variant="tuned")
def bind_tuned(x, a, out):
    ops = build.load()

    def make(config):
        threads, blocks = config["threads"], blocks_for(x.numel(), x.element_size(), config, x.device)
        return with_grid(lambda: ops.scale(x, a, out, False, threads, blocks), blocks=blocks)
    return chosen("scale tuned", x.numel(), x.dtype, make, x.device)
