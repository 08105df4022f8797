"""The 1-D kernels' launch configurations (copy, scale, sum, max, the chain's elementwise
steps): this GPU's table's (harness.launch.configs), else the rule.

A config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one pass
over the data. Each thread takes CHUNKS chunks (4 consecutive elements, as 8-byte words: device.py) a
step, their loads issued before any is used, in a grid-stride loop. A config is a launch parameter, not a compile-time constant:
one compiled kernel serves them all, so trying a config costs a timing, not a build.
Under the simulator nothing is timed: one small config, so that a block's Python threads
stay few, with several blocks and grid-stride steps on the tests' sizes."""
from impls._frameworks import _launch
from impls._frameworks._launch import CANDIDATES, configured, with_grid  # noqa: F401 - the Numba impls' names
from impls._frameworks.numba.runtime import SIMULATED, TooManyThreads, sm_count

UNROLL = 16         # elements in flight per thread per step: CHUNKS chunks of 4 (device.py)
CHUNKS = 4          # chunks a step: 32 bytes of a 16-bit type, 64 of fp32, loaded before any is used
SIM_CONFIG = dict(threads=64, per_sm=2)
SIM_SMS = 2         # the simulator's pretend SMs: a grid of 4 blocks of 64 threads


def blocks_for(n: int, config: dict, device) -> int:
    return _launch.blocks_for(n, UNROLL, config, SIM_SMS if SIMULATED else sm_count(device))


# Numba's 1-D reductions hold the GPU twice over: 1024 threads, 2 blocks an SM (1 block: 0.84-0.99
# of the tuned config on the H200; 2: 0.96-1.00).
REDUCTION_RULE = dict(threads=1024, per_sm=2)


def chosen(kernel: str, n: int, dtype, make, device, rule: dict = _launch.RULE):
    """The launcher ``make(config)`` builds for ``kernel`` (without "numba") at ``n`` elements:
    _launch.chosen on a GPU; under the simulator, where nothing is timed, SIM_CONFIG."""
    if SIMULATED:
        launch = make(SIM_CONFIG)
        return configured(launch, {**SIM_CONFIG, **getattr(launch, "grid", {}), "simulated": True})
    return _launch.chosen(f"numba {kernel}", n, dtype, make, device, CANDIDATES, rule, unrunnable=(TooManyThreads,))
