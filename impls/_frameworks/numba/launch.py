"""The 1-D kernels' launch configurations (copy, scale, sum, max, the chain's elementwise
steps), chosen through harness.tuner.

A config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one pass
over the data. Each thread takes CHUNKS chunks (4 consecutive elements, as 8-byte words: device.py) a
step, their loads issued before any is used, in a grid-stride loop. A config is a launch parameter, not a compile-time constant:
one compiled kernel serves them all, so trying a config costs a timing, not a build.
Under the simulator nothing is timed: one small config, so that a block's Python threads
stay few, with several blocks and grid-stride steps on the tests' sizes."""
from impls._frameworks import _launch
from impls._frameworks._launch import CANDIDATES, configured, with_grid  # noqa: F401 - the Numba impls' names
from impls._frameworks.numba import cachedir
from impls._frameworks.numba.runtime import SIMULATED, TooManyThreads, sm_count

UNROLL = 16         # elements in flight per thread per step: CHUNKS chunks of 4 (device.py)
CHUNKS = 4          # chunks a step: 32 bytes of a 16-bit type, 64 of fp32, loaded before any is used
SIM_CONFIG = dict(threads=64, per_sm=2)
SIM_SMS = 2         # the simulator's pretend SMs: a grid of 4 blocks of 64 threads


def blocks_for(n: int, config: dict, device) -> int:
    return _launch.blocks_for(n, UNROLL, config, SIM_SMS if SIMULATED else sm_count(device))


def fingerprint(space: list[dict]) -> dict:
    return {"kernel": cachedir.source_hash(), "space": space, "framework": "numba"}


def tuned(key, label: str, make, device, candidates: list[dict] = CANDIDATES):
    """The launcher ``make(config)`` builds for the config the tuner finds fastest for ``key``
    (kept on disk per source hash and GPU), with the config and its table attached. ``key``
    starts with "numba", so that no other framework's kernel of the same op and size takes
    this one's choice."""
    if SIMULATED:
        launch = make(SIM_CONFIG)
        return configured(launch, {**SIM_CONFIG, **getattr(launch, "grid", {}), "simulated": True})
    return _launch.tuned(key, f"Numba {label}", make, device, fingerprint(candidates), candidates,
                         unrunnable=(TooManyThreads,))

