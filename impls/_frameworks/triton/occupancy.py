"""How many programs of a compiled Triton kernel an SM runs at once, and the persistent
grid that follows from it."""
import functools

from impls._frameworks.triton.launch import interpreting, sm_count

INTERPRETED_PER_SM = 8      # programs per SM of a persistent grid under the interpreter
# sm_90 has 64K registers per SM and runs at most 2048 threads: a program of more than
# 32 registers per thread leaves thread slots empty (ptxas's maxnreg caps it).
FULL_OCCUPANCY_REGS = 65536 // 2048


@functools.cache
def _libcuda():
    import ctypes
    return ctypes.CDLL("libcuda.so.1")


def programs_per_sm(compiled) -> int:
    """The CUDA driver's occupancy calculator (cuOccupancyMaxActiveBlocksPerMultiprocessor)
    on the loaded binary, which counts its threads, its registers as allocated and its
    shared memory."""
    import ctypes
    compiled._init_handles()   # loads the binary (Triton does it lazily, at the first launch)
    count = ctypes.c_int(0)
    threads = compiled.metadata.num_warps * 32
    err = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(count), ctypes.c_void_p(compiled.function), ctypes.c_int(threads),
        ctypes.c_size_t(compiled.metadata.shared))
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed (CUresult {err}) for "
                           f"{compiled.name}: {threads} threads, {compiled.metadata.shared} bytes of shared memory")
    return max(1, count.value)


def threads_per_sm(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).max_threads_per_multi_processor


def first_guess(tiles: int, device, num_warps: int) -> int:
    """A persistent grid before its binary is known: what the SMs' thread slots allow."""
    return min(tiles, max(1, threads_per_sm(device) // (32 * num_warps)) * sm_count(device))


def persistent_programs(kernel, tiles: int, device, args: tuple, kwargs: dict) -> int:
    """The grid of a persistent launch: as many programs as the GPU runs at once, at most
    one per tile. Its programs split the tiles evenly (pid, pid + programs, ...), so a
    program that waited for a free slot would run its whole share after the others had
    finished theirs: a second, part-empty wave. The count comes from the compiled kernel
    (programs_per_sm), starting from what the threads allow; the grid size is also an
    argument, which a kernel that does not leave it unspecialised (rows.BATCH_ARGS) takes a
    binary per class of (divisible by 16 or not), so the kernel is looked up again for a
    smaller count until that binary fits it: the grid only shrinks, and never asks for more
    programs than its own binary runs at once."""
    sms = sm_count(device)
    if interpreting():   # no binary: a few programs exercise the grid-stride loops
        return min(tiles, INTERPRETED_PER_SM * sms)
    programs = first_guess(tiles, device, kwargs["num_warps"])
    while True:
        fit = min(tiles, programs_per_sm(kernel.warmup(*args, programs, grid=(programs,), **kwargs)) * sms)
        if fit >= programs:
            return programs
        programs = fit
