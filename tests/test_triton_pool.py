"""The Triton compile pool (impls/_frameworks/triton/pool.py): the dispatch by
triton_compile, the fallback when there is no pool, a stand-in tensor that Triton
specialises as the tensor, and a real pool of processes building stand-in kernels (each
candidate's failure named, the others built, a pool whose process died replaced)."""
import json
import multiprocessing as mp

import pytest
import torch

from harness import registry, tuner, tuning_cache
from harness.runner import CaseSpec
from impls._frameworks import triton as triton_framework
from impls._frameworks.triton import launch as triton_launch
from impls._frameworks.triton import pool
from tests import pool_kernels


@pytest.fixture
def on_a_gpu(monkeypatch):
    """build_all as on a GPU (no interpreter), with no pool of an earlier test reachable."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv(pool.ADDRESS, raising=False)
    pool.forget_connection()
    yield monkeypatch
    pool.stop()
    pool.forget_connection()


def _call(x, block=64):
    return ((x, 7), {"BLOCK": block, "num_warps": 4, "LOAD": "evict_first"}, (3,))


def test_a_stand_in_is_specialised_as_its_tensor():
    """Triton's specialisation (its own native code) gives a pool process's stand-in the
    type and alignment of the tensor it stands for: aligned and at an odd element offset."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend
    buf = torch.empty(64, dtype=torch.bfloat16)
    for t in (buf, buf[1:], buf[8:], torch.empty(5, dtype=torch.float32)[3:]):
        stand_in = pool._StandIn(pool.portable(t))
        assert native_specialize_impl(CUDABackend, stand_in, False, True, True) == \
            native_specialize_impl(CUDABackend, t, False, True, True)
    assert native_specialize_impl(CUDABackend, pool._StandIn(pool.portable(buf[1:])), False, True, True)[1] == ""


def test_build_all_goes_where_triton_compile_says(on_a_gpu):
    sent, threaded = [], []
    on_a_gpu.setattr(pool, "build", lambda jobs: sent.append(jobs) or [("ok", 0.1)] * len(jobs))
    on_a_gpu.setattr(triton_launch, "_in_threads", threaded.append)
    x = torch.empty(16)
    builds = [(pool_kernels.good, _call(x), "rows=1 num_warps=4"), (pool_kernels.good, _call(x, 128), "rows=2")]
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "processes")
    assert triton_launch.build_all(builds) == {"how": "processes", "failed": []}
    assert [(j.module, j.name, j.candidate) for j in sent[0]] == [("tests.pool_kernels", "good", "rows=1 num_warps=4"),
                                                                  ("tests.pool_kernels", "good", "rows=2")]
    assert sent[0][0].args == (pool.Pointer("float32", x.data_ptr()), 7) and sent[0][1].kwargs["BLOCK"] == 128
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "threads")
    assert triton_launch.build_all(builds) == {"how": "threads"} and threaded == [builds]
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "serial")
    assert triton_launch.build_all(builds) == {"how": "serial"} and len(sent) == 1 and len(threaded) == 1
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "eager")
    with pytest.raises(ValueError, match="HARNESS_TRITON_COMPILE='eager': use one of processes, threads, serial"):
        triton_launch.build_all(builds)
    on_a_gpu.setenv("TRITON_INTERPRET", "1")   # the interpreter compiles nothing
    assert triton_launch.build_all(builds) is None


def test_without_a_pool_the_candidates_build_in_threads_and_the_reason_is_said_once(on_a_gpu, capsys):
    threaded = []
    on_a_gpu.setattr(triton_launch, "_in_threads", threaded.append)
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "processes")
    builds = [(pool_kernels.good, _call(torch.empty(4)), "a"), (pool_kernels.good, _call(torch.empty(4), 32), "b")]
    assert triton_launch.build_all(builds) == {"how": "threads"}
    assert triton_launch.build_all(builds) == {"how": "threads"} and len(threaded) == 2
    err = capsys.readouterr().err
    assert err.count("no compile pool") == 1 and "HARNESS_TRITON_POOL unset" in err
    pool.forget_connection()
    on_a_gpu.setenv(pool.ADDRESS, "/nonexistent/harness-triton-pool/socket")
    assert triton_launch.build_all(builds) == {"how": "threads"}
    assert "did not answer" in capsys.readouterr().err


def test_the_pool_builds_each_candidate_and_names_those_it_cannot(on_a_gpu, tmp_path, capsys):
    """A real pool of two processes, reached through its socket as a case's process reaches
    it, started lazily: no process until the first build is asked for; a build gets the
    tensor's dtype and address, the constexprs and the grid; a candidate that does not fit,
    or that a pool process cannot find, is reported with its name and kind while the others
    build; a process that dies is a pool error for what it held, and the pool is replaced
    for the next builds."""
    out = tmp_path / "built.jsonl"
    on_a_gpu.setenv("POOL_TEST_OUT", str(out))
    on_a_gpu.setenv("HARNESS_TRITON_COMPILE", "processes")
    assert pool.start(("tests.pool_kernels",), n=2, eager=False)
    assert pool._pool.executor is None and not mp.active_children()
    x = torch.empty(33, dtype=torch.bfloat16)[1:]   # an odd element offset: not 16-byte aligned
    report = triton_launch.build_all([(pool_kernels.good, _call(x), "first"),
                                      (pool_kernels.too_big, _call(x, 4096), "too big"),
                                      (pool_kernels.elsewhere, _call(x), "lost"),
                                      (pool_kernels.good, _call(x, 128), "second")])
    assert report["how"] == "processes" and len(mp.active_children()) == 2
    assert [(f["candidate"], f["kind"]) for f in report["failed"]] == [("too big", "compile"), ("lost", "pool")]
    assert "OutOfResources" in report["failed"][0]["error"] and "not found" in report["failed"][1]["error"]
    err = capsys.readouterr().err
    assert "too_big too big: not built in the compile pool (compile: OutOfResources" in err
    built = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(b["kwargs"]["BLOCK"] for b in built) == [64, 128]
    for b in built:
        assert b["args"] == [{"dtype": "torch.bfloat16", "address": x.data_ptr()}, 7] and b["grid"] == [3]
        assert b["kwargs"]["LOAD"] == "evict_first" and b["kwargs"]["num_warps"] == 4
    report = triton_launch.build_all([(pool_kernels.dies, _call(x), "crashes")])
    assert [(f["candidate"], f["kind"]) for f in report["failed"]] == [("crashes", "pool")]
    report = triton_launch.build_all([(pool_kernels.good, _call(x, 256), "after")])
    assert report == {"how": "processes", "failed": []}
    assert json.loads(out.read_text().splitlines()[-1])["kwargs"]["BLOCK"] == 256


def test_the_framework_starts_the_pool_with_the_run_on_a_gpu_only(monkeypatch, tmp_path):
    """The pool opens with a run on a GPU; its processes start with it where the run will
    tune for sure (nothing of this machine's kept in the tuning cache, or tuning=fresh), else at the first
    build asked of it."""
    started = []
    monkeypatch.setattr(pool, "start", lambda modules, eager: started.append((modules, eager)) or True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")   # the kernels as the other CPU tests import them
    registry.load_impls("rmsnorm", ["triton"])
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.delenv("HARNESS_TUNING", raising=False)
    cases = [CaseSpec("rmsnorm", "triton", "-", "float32", (4, 4096))]
    fw = triton_framework.Triton()
    monkeypatch.setattr(tuner, "machine", lambda device: "this GPU and stack")
    monkeypatch.setenv("HARNESS_TRITON_COMPILE", "processes")
    assert fw.warm(torch.device("cuda"), cases) is True
    assert started == [(["impls.rmsnorm.triton"], True)]   # an empty cache: every key tunes
    tuning_cache.store("another GPU's entry", {"config": {}}, "another GPU")
    assert fw.warm(torch.device("cuda"), cases) is True and started[-1][1] is True   # none of this machine's
    tuning_cache.store("an entry", {"config": {}}, "this GPU and stack")
    assert fw.warm(torch.device("cuda"), cases) is True and started[-1][1] is False
    monkeypatch.setenv("HARNESS_TUNING", "fresh")
    assert fw.warm(torch.device("cuda"), cases) is True and started[-1][1] is True
    assert fw.warm(torch.device("cpu"), cases) is False
    monkeypatch.setenv("HARNESS_TRITON_COMPILE", "threads")
    assert fw.warm(torch.device("cuda"), cases) is False and len(started) == 4


def test_builds_at_once_follow_the_cores_this_process_may_use(monkeypatch):
    """One cap for Triton's build threads and its pool's processes: the cores of this
    process's affinity (a container's or Slurm's share), at most MAX_BUILDS."""
    from impls._frameworks import _launch
    monkeypatch.setattr(_launch.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert _launch.builds_at_once() == 3
    lazy = pool.Pool(n=None, eager=False)   # its socket only: no process started
    lazy.close()
    assert lazy.n == 3 and lazy.executor is None and lazy.build([]) is None   # closed: starts none
    monkeypatch.setattr(_launch.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert _launch.builds_at_once() == _launch.MAX_BUILDS == 16


def test_every_process_of_a_gpu_run_shares_one_triton_cache(monkeypatch, tmp_path):
    """prepare (the harness's process, before the workers and the pool start) sets
    TRITON_CACHE_DIR to Triton's default, so that torch.compile's Inductor, which points it at
    a folder of its own where it is unset, leaves it alone; a user's own folder is kept."""
    import os

    from triton import knobs
    monkeypatch.setenv("TRITON_CACHE_DIR", "set and deleted: the test's end restores the process's own")
    monkeypatch.delenv("TRITON_CACHE_DIR")
    monkeypatch.setenv("TRITON_INTERPRET", "set and deleted")
    monkeypatch.delenv("TRITON_INTERPRET")
    default = knobs.cache.dir
    triton_framework.Triton().prepare(torch.device("cuda"))
    assert os.environ["TRITON_CACHE_DIR"] == default
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    triton_framework.Triton().prepare(torch.device("cuda"))
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path)


def test_a_failure_inside_the_pool_is_answered_never_left_waiting(on_a_gpu, monkeypatch):
    """The case's process waits for the pool's answer: a failure of the pool's own (here its
    build raising) comes back as an error for each job, and the next request is served."""
    assert pool.start(("tests.pool_kernels",), n=1, eager=False)
    calls = []

    def failing(jobs):
        calls.append(len(jobs))
        if len(calls) == 1:
            raise RuntimeError("the executor could not be replaced")
        return [("built", "stand-in")] * len(jobs)
    monkeypatch.setattr(pool._pool, "build", failing)
    x = torch.empty(32, dtype=torch.float32)
    jobs = [pool.job(pool_kernels.good, _call(x), "first"), pool.job(pool_kernels.good, _call(x, 128), "second")]
    first = pool.build(jobs)
    assert first == [("error", "pool", "the compile pool failed: RuntimeError: the executor could not be replaced")] * 2
    assert pool.build(jobs) == [("built", "stand-in")] * 2 and calls == [2, 2]


def test_a_pool_whose_processes_cannot_start_closes_its_socket_and_says_why(on_a_gpu, monkeypatch):
    """Processes that cannot start at once (eager) leave no socket behind, and the run is told
    why; its cases then build in their own process."""
    def cannot(self):
        raise OSError("no more processes")
    monkeypatch.setattr(pool.Pool, "_executor", cannot)
    with pytest.raises(OSError, match="no more processes"):
        pool.Pool(("tests.pool_kernels",), n=1, eager=True)
    assert pool.start(("tests.pool_kernels",), n=1, eager=True) is False and pool._pool is None
