"""The main command on a CPU (`harness op=rmsnorm impl=all`, sweep=auto: smoke): how much it
runs, how much of it the simulator runs, and what its end says.

A CPU run checks correctness; its times say nothing of a kernel's speed. Numba's simulator
runs a Python thread per CUDA thread (a launch of 4x4096 took 3-5 s on the 2-core CI machine,
and a case launches its kernel some 16 times), so the smoke shapes are sized for what the checks
need (a row shorter than a chunk, several rows in ragged blocks and sub-batches, 16-bit tails),
not for a GPU. These tests fail when that work grows back; they do not time it."""
import dataclasses
import pkgutil

import pytest
import torch
from hydra import compose, initialize_config_dir

import impls.rmsnorm
from harness.run import plan as planning
from harness import registry
from harness.commands.options import settings_from
from harness.records.record import Record
from harness.run.runner import Runner
from harness.records.sinks import console

CPU = torch.device("cpu")
# 2 row shapes x 3 dtypes x 10 impls and variants, of which eager, torch_compile, triton and numba
# (each also naive) run here.
MAIN_CASES, MAIN_RUNNABLE = 60, 36
# Elements of one input set (every tensor of it) that an interpreted case of the main command
# may hand its interpreter: 5x100 and its weight take 600.
SIM_SET_ELEMENTS = 1000
# Elements the simulator goes through in one such case, summed over its launches: 6 checked input
# sets, 4 of the contract, 2 for determinism, 2 sub-batches (1 and 3 rows), the one timed launch
# and the refill after it: 9,600 at 5x100.
SIM_CASE_ELEMENTS = 10_000


def main_plan():
    """The plan of the main command on a CPU, of the impls the repository ships (other tests of
    this process may have registered plugins' impls)."""
    with initialize_config_dir(config_dir=str(planning.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["op=rmsnorm", "impl=all"])
    planning.resolve_sweep(cfg, CPU)
    plan = planning.build(cfg, CPU)
    shipped = {m.name for m in pkgutil.iter_modules(impls.rmsnorm.__path__)}
    return cfg, dataclasses.replace(plan, cases=[c for c in plan.cases if c.impl in shipped])


def interpreted_cases(plan):
    frameworks = registry.frameworks()
    return [c for c in plan.runnable if frameworks[c.impl].interpreted(CPU)]


def elements(inputs: dict) -> int:
    return sum(v.numel() for v in inputs.values() if isinstance(v, torch.Tensor))


def input_sets(spec, case):
    dtype = getattr(torch, case.dtype)
    return [spec.inputs(case.shape, dtype, CPU, seed, name)
            for seed, name in enumerate(["random", *spec.adversarial])]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the plan a CPU makes")
def test_the_cpu_main_command_runs_every_framework_on_inputs_sized_for_the_simulator():
    _, plan = main_plan()
    assert plan.sweep == "smoke"
    assert len(plan.cases) <= MAIN_CASES and len(plan.runnable) <= MAIN_RUNNABLE, (len(plan.cases),
                                                                                   len(plan.runnable))
    assert {c.impl for c in plan.runnable} == {"eager", "torch_compile", "triton", "numba"}
    spec = registry.ops()["rmsnorm"](**plan.cases[0].params)
    interpreted = interpreted_cases(plan)
    assert {c.impl for c in interpreted} == {"triton", "numba"}
    for case in interpreted:
        for inputs in input_sets(spec, case):
            assert elements(inputs) <= SIM_SET_ELEMENTS, (case, elements(inputs))
    # what the checks need: a row shorter than a 16-byte chunk; several rows, so that a batch of
    # one row and a ragged one can be checked; rows whose 16-bit chunks leave a tail
    shapes = {c.shape for c in interpreted}
    assert any(cols < 8 for _, cols in shapes) and any(rows >= 3 for rows, _ in shapes)
    assert any(cols % 8 for rows, cols in shapes if rows >= 3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the simulator is the CPU's")
def test_a_simulated_case_of_the_main_command_launches_a_bounded_amount_of_work(monkeypatch):
    """Every check of the case runs (its record holds them all); the elements its launches went
    through, summed, stay within SIM_CASE_ELEMENTS: a shape or a repetition that grows back
    fails here."""
    cfg, plan = main_plan()
    case = max((c for c in interpreted_cases(plan) if c.impl == "numba"),
               key=lambda c: c.shape[0] * c.shape[1])
    case = dataclasses.replace(case, dtype="float32")
    launched = []
    key = (case.op, case.impl, case.variant)
    real = registry.registered()[key]

    def bind(**inputs):
        launch = real.bind(**inputs)

        def counted():
            launched.append(elements({k: v for k, v in inputs.items() if k != "out"}))
            return launch()
        counted.config = getattr(launch, "config", {})
        return counted
    monkeypatch.setitem(registry._impls, key, dataclasses.replace(real, bind=bind))
    settings = dataclasses.replace(settings_from(cfg, "test", 1234), roof_cache=False, roof_bytes=16 << 20)
    rec = Runner(CPU, settings).run(case)
    assert rec.status == "ok", rec.reason
    assert rec.timer == "wall_interpreter" and rec.samples == 1
    assert len(rec.checks) == settings.seeds + len(registry.ops()["rmsnorm"].adversarial)
    assert rec.determinism_runs == 2 and rec.n_distinct == 1 and rec.batch_invariant is True
    assert rec.batch_sizes == [1, 3] and not rec.violations
    assert sum(launched) <= SIM_CASE_ELEMENTS, (len(launched), sum(launched))


def record(device: str, timer: str, impl: str = "eager") -> Record:
    return Record("rmsnorm", impl, "-", "float32", [5, 100], device=device, status="ok", timer=timer,
                  median_us=10.0, bytes=4000)


def test_a_cpu_run_ends_by_saying_it_checked_correctness_and_that_speed_needs_a_gpu():
    text = console.render([record("cpu", "wall"), record("cpu", "wall_interpreter", "numba")])
    assert text.splitlines()[-1] == console.CPU_RUN
    assert "correctness" in console.CPU_RUN and "speed needs a GPU" in console.CPU_RUN
    assert console.CPU_RUN not in console.render([record("cuda:0", "cuda_events")])
    mixed = console.render([record("cuda:0", "cuda_events"), record("cpu", "wall")])   # a report of two runs
    assert console.CPU_RUN not in mixed and "CPU wall-clock times: not GPU measurements" in mixed
