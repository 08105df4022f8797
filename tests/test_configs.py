"""Launch configs as data (harness.launch.configs): a run reads this GPU's table, else the framework's
rule, and says which; harness-tune (harness.commands.tune) writes tables a run reads back. On a CPU,
with stand-in GPUs and stand-in searches: what only a GPU shows is in tests/test_gpu.py."""
import pytest
import torch
import yaml

from harness.launch import configs, tuner

from harness.commands import tune

H100 = "NVIDIA H100 80GB HBM3"
TABLE = """gpu: NVIDIA H100 80GB HBM3
kernels:
  cuda rmsnorm tuned:
    4096 bfloat16: {group: 256, packs: 2, threads: 256, us: 176.4}
    4096 bfloat16 rows 1-181: {group: 256, packs: 4, threads: 256}
    781 float32: {group: 128, packs: 2, threads: 256}
    781 float32 rows 1823-1823: {group: 64, packs: 4, threads: 256}
"""


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """conf/launch/ in a folder of the test's; a stand-in GPU named H100 for every device."""
    monkeypatch.setattr(configs, "TABLES", tmp_path)
    monkeypatch.setattr(configs, "_tables", {})
    monkeypatch.setattr(configs, "gpu_name", lambda device: H100)
    (tmp_path / "h100-80gb-hbm3.yaml").write_text(TABLE)
    return tmp_path


RULE = {"group": 32, "packs": 1, "threads": 256}


def test_a_gpu_name_names_its_table():
    assert configs.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert configs.gpu_slug("NVIDIA H200") == "h200"
    assert configs.table_path("NVIDIA H200").name == "h200.yaml"


def test_a_run_takes_the_table_s_entry_and_names_it(tables):
    choice = configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 4096, "gpu", RULE)
    assert choice.config == {"group": 256, "packs": 2, "threads": 256}   # what harness-tune measured is not launched
    blob = configs.blob_id(TABLE.encode())[:12]
    assert choice.source.startswith("table ") and choice.source.endswith(f"h100-80gb-hbm3.yaml@{blob} (4096 bfloat16)")


def test_a_batch_in_a_range_takes_the_range_s_config_and_any_other_the_row_length_s(tables):
    small = configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 16, "gpu", RULE)
    assert small.config["packs"] == 4 and small.source.endswith("(4096 bfloat16 rows 1-181)")
    assert configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 182, "gpu", RULE).config["packs"] == 2
    assert configs.config_for("cuda rmsnorm tuned", 781, torch.float32, 1823, "gpu", RULE).config["group"] == 64
    assert configs.config_for("cuda rmsnorm tuned", 781, torch.float32, 16, "gpu", RULE).config["group"] == 128


def test_what_no_table_holds_takes_the_rule(tables):
    for kernel, cols, dtype in (("cuda rmsnorm tuned", 8192, torch.bfloat16), ("cuda rmsnorm tuned", 4096, torch.float16),
                                ("numba rmsnorm tuned", 4096, torch.bfloat16)):
        assert configs.config_for(kernel, cols, dtype, 8, "gpu", RULE) == configs.Choice(RULE, "rule")


def test_a_gpu_without_a_table_takes_the_rule_everywhere(tables, monkeypatch):
    monkeypatch.setattr(configs, "gpu_name", lambda device: "NVIDIA B200")
    assert configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 4096, "gpu", RULE).source == "rule"


def test_an_entry_the_kernel_no_longer_takes_gives_way_to_the_rule_and_says_why(tables, capsys):
    def check(config):
        if config["packs"] not in (1, 4):
            raise ValueError(f"packs {config['packs']} is not among this kernel's configs")
    choice = configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 4096, "gpu", RULE, check)
    assert choice.config == RULE and "does not fit this kernel: packs 2" in choice.source
    assert "the rule's config runs instead" in capsys.readouterr().err


@pytest.mark.parametrize("text, problem", [
    ("kernels: [1, 2]", "expected 'gpu:' and 'kernels:'"),
    ("kernels:\n  cuda rmsnorm tuned:\n    4096: {group: 4}", "entry 4096: expected"),
    ("kernels:\n  cuda rmsnorm tuned:\n    4096 bfloat16 rows 9-3: {group: 4}", "lo <= hi"),
    ("kernels: {a: [}", "not YAML"),
    # a batch's range without its row length's own entry: the other batches would take the rule's bits
    ("kernels:\n  cuda rmsnorm tuned:\n    4096 bfloat16 rows 1-9: {group: 4}", "without the entry '4096 bfloat16'"),
])
def test_a_damaged_table_is_refused_with_the_file_and_the_entry(tmp_path, text, problem):
    with pytest.raises(configs.TableError, match=problem):
        configs.parse(text, tmp_path / "x.yaml")


def test_batch_ranges_split_between_decided_sizes_on_a_log_scale():
    a, b, main = {"k": "a"}, {"k": "b"}, {"k": "main"}
    # the tuning problems (16, 2048, the ~256 MiB one) and a measured batch of 1
    points = {1: a, 16: b, 2048: main, 65536: main}
    assert tune.ranges(points, main) == [(1, 4, a), (5, 181, b)]
    # a range's neighbour of the same config is one range; the last runs to any batch
    assert tune.ranges({16: b, 2048: b, 65536: main}, main) == [(1, 11585, b)]
    assert tune.ranges({16: main, 100000: a}, main) == [(1265, tune.LAST_ROW, a)]


def _found(config, rule, candidates, batches=()):
    tuned = tuner.Tuned(config, {"candidates": candidates}, [[65536, None], [2048, None], [16, None], *batches])
    return tune.Found("cuda rmsnorm tuned", 4096, "bfloat16", tuned, None, rule)


def test_harness_tune_compares_the_search_the_table_and_the_rule_on_one_problem(tables):
    table = configs.table_for(H100)
    chosen, held = {"group": 256, "packs": 4, "threads": 256}, {"group": 256, "packs": 2, "threads": 256}
    candidates = [{**chosen, "us": 170.0}, {**held, "us": 176.4}, {**RULE, "us": 200.0}]
    c = tune.compare(_found(chosen, RULE, candidates), table)
    assert c["changed"] and c["search"]["us"] == 170.0 and c["table"]["us"] == 176.4 and c["rule"]["us"] == 200.0
    assert tune.line(c) == ("cuda rmsnorm tuned 4096 bfloat16: search 170.0 us, table 176.4 us (0.964), "
                            "rule 200.0 us (0.850)  CHANGED")
    # what the search saw go wrong is said under the entry
    found = _found(chosen, RULE, candidates)
    found.tuned.table.update(bit_neutral_changed_bits=[[held, chosen]])
    found.tuned.table["candidates"].append({"group": 64, "packs": 8, "threads": 256, "us": None})
    assert tune.line(tune.compare(found, table)).splitlines()[1:] == [
        f"    warning: bit-neutral switches changed the bits: {held} vs {chosen}",
        "    warning: 1 of 4 candidates did not run, e.g. {'group': 64, 'packs': 8, 'threads': 256}"]


def test_harness_tune_writes_entries_a_run_reads_back(tables):
    chosen = {"group": 256, "packs": 4, "threads": 256}
    small = {"group": 256, "packs": 8, "threads": 256}
    held = {"group": 256, "packs": 2, "threads": 256}
    found = _found(chosen, RULE, [{**chosen, "us": 170.0}, {**held, "us": 176.4}, {**RULE, "us": 200.0}])
    found.tuned.batches[2] = [16, small]
    c = tune.compare(found, configs.table_for(H100))
    path = tables / "h100-80gb-hbm3.yaml"
    path.write_text(tune.written(path, H100, [c]))
    text = path.read_text()
    assert "    4096 bfloat16: {group: 256, packs: 4, threads: 256, us: 170.0}" in text
    assert "    4096 bfloat16 rows 1-181: {group: 256, packs: 8, threads: 256}" in text
    assert "781 float32 rows 1823-1823" in text   # an entry it did not measure stays
    configs._tables.clear()
    assert configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 8, "gpu", RULE).config == small
    assert configs.config_for("cuda rmsnorm tuned", 4096, torch.bfloat16, 8192, "gpu", RULE).config == chosen
    assert yaml.safe_load(text)["gpu"] == H100


def test_a_harness_tune_cut_by_sigint_keeps_the_searches_done(monkeypatch, capsys):
    """A time limit's SIGINT in the third case's search: the two entries searched before it are
    kept for the comparison (it was a traceback, and nothing was compared)."""
    done = [_found({"group": 256, "packs": p, "threads": 256}, RULE, []) for p in (2, 4)]

    def binds(cases, device):
        for i, f in enumerate(done):
            configs._session.found[i] = f
        raise KeyboardInterrupt
    monkeypatch.setattr(tune, "_bind_all", binds)
    session, cut = tune.search([], "gpu")
    assert cut and list(session.found.values()) == done and configs._session is None
    assert "the 2 entries searched so far are compared; no table is written" in capsys.readouterr().err


def test_harness_tune_refuses_a_machine_without_a_gpu(capsys):
    assert tune.main(["op=rmsnorm", "device=cpu"]) == 2
    assert "measures launch configs on a GPU" in capsys.readouterr().err
    assert tune.main(["op=rmsnorm", "write=yes"]) == 2
    assert "write='yes'" in capsys.readouterr().err


def test_harness_tune_m_runs_a_job_per_sweep_point_through_hydra_s_launcher(tmp_path):
    """`harness-tune -m` (what harness-nightly --tune runs): a job per op, each planning inside
    Hydra's job and keeping its comparison in its own folder; on a GPU-less machine each job's
    refusal is the exit status, and a job without its comparison fails the sweep however it
    ended; a file jobs would share (out=, write=true) is refused."""
    import subprocess
    import sys

    def tune_m(*args, gpu=False):
        stand_ins = ("import sys, torch\n"
                     "from harness.run import device\n"
                     "from harness.commands import tune\n"
                     + ("device.resolve = lambda spec: torch.device('cuda')\n"
                        "device.memory_bytes = lambda d: 80 << 30\n"
                        f"torch.cuda.get_device_name = lambda d=None: {H100!r}\n"
                        "tune.search = lambda cases, d: (print(len(cases), 'cases searched'), (tune.Session(), False))[1]\n"
                        if gpu is True else gpu or "")
                     + "sys.exit(tune.main(sys.argv[1:]))")
        return subprocess.run([sys.executable, "-c", stand_ins, "-m", *args], capture_output=True, text=True,
                              timeout=300)

    on_gpu = tune_m(f"hydra.sweep.dir={tmp_path / 'gpu'}", "op=copy,scale", "impl=triton", gpu=True)
    assert on_gpu.returncode == 0 and on_gpu.stdout.count("12 cases searched") == 2, on_gpu.stderr[-2000:]
    assert sorted(p.parent.name for p in (tmp_path / "gpu").glob(f"*/{tune.TUNE_FILE}")) == ["0-op=copy", "1-op=scale"]
    on_cpu = tune_m(f"hydra.sweep.dir={tmp_path / 'cpu'}", "op=copy,scale", "impl=eager")
    assert on_cpu.returncode == 2 and on_cpu.stderr.count("measures launch configs on a GPU") == 2
    assert sorted(p.name for p in (tmp_path / "cpu").glob("*-op=*")) == ["0-op=copy", "1-op=scale"]
    # jobs that end without their comparison, their status lost (as a Slurm job's is), in the folder
    # the sweep above filled: the sweep's end says so; and if that look-over fails, so does the sweep
    lost = tune_m(f"hydra.sweep.dir={tmp_path / 'gpu'}", "op=copy,scale", "impl=eager",
                  gpu="tune._tune = lambda own, overrides: 0\n")
    assert lost.returncode == 1 and "2 job(s) kept no comparison" in lost.stderr, lost.stderr[-2000:]
    unlooked = tune_m(f"hydra.sweep.dir={tmp_path / 'gpu'}", "op=copy", "impl=eager",
                      gpu="tune._tune = lambda own, overrides: 0\ntune.Unkept.on_multirun_end = lambda *a, **k: 1 / 0\n")
    assert unlooked.returncode == 1 and "were not looked over" in unlooked.stderr, unlooked.stderr[-2000:]
    for own in ("out=tune.jsonl", "write=true"):
        refused = tune_m(f"hydra.sweep.dir={tmp_path / 'no'}", "op=copy", own)
        assert refused.returncode == 2 and f"{own} with -m" in refused.stderr and not (tmp_path / "no").exists()


# --- every committed table fits the kernels as they are -------------------------------------

ROW_OPS = ("softmax", "rmsnorm", "layernorm", "rmsnorm_silu_mul_add")
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def entry_problem(kernel: str, cols: int, dtype: str, config: dict, monkeypatch=None) -> str | None:
    """Why a table entry is not a config its kernel takes (None: it is one): the kernel's own
    check, and membership in the space harness-tune searches, for every framework of ours."""
    from impls._frameworks import _launch
    framework, op, variant, *rest = kernel.split()
    itemsize = ITEMSIZE.get(dtype)
    if itemsize is None:
        return f"dtype {dtype!r}"
    try:
        if op not in ROW_OPS or variant in ("silu", "mul", "add"):
            if framework == "triton":
                from impls._frameworks.triton import elementwise
                from impls._frameworks.triton.launch import HINTS
                ok = config in [dict(BLOCK=b, num_warps=w, hints=h) for b, w in elementwise.TILES for h in HINTS]
            else:
                ok = config in _launch.CANDIDATES
            return None if ok else "not among the 1-D configs"
        if framework in ("cuda", "cupy"):
            from impls._frameworks.cuda import rows
            on_chip = not (op == "softmax" and variant != "on_chip")
            kept, looped = (on_chip, not (op == "softmax" and variant == "on_chip"))
            rows.check(1, cols, config, itemsize, kernel)
            return None if config in rows.configs(cols, itemsize, kept, looped) else "not in the kernel's space"
        if framework == "numba":
            from impls._frameworks.numba import rows
            cacheable = not (op == "softmax" and variant != "on_chip")
            keeps = {"three_pass": (rows.KEPT, rows.READ), "online": (rows.KEPT, rows.READ),
                     "on_chip": (rows.KEPT, rows.CACHED)}.get(variant, tuple(rows.KEEPS)) if op == "softmax" \
                else tuple(rows.KEEPS)
            rows.check(config, cols, itemsize, kernel, keeps)
            return None if config in rows.configs(cols, cacheable, itemsize, keeps) else "not in the kernel's space"
        if framework == "triton":
            return triton_entry_problem(op, variant, cols, dtype, config)
    except ValueError as e:
        return str(e)
    return f"no framework {framework!r} of ours"


def triton_entry_problem(op, variant, cols, dtype, config) -> str | None:
    from impls._frameworks.triton import rows
    module = __import__(f"impls.{op}.triton", fromlist=["OPTIONS"])
    block, on_chip = rows.row_block(cols)
    if op == "softmax" and variant != "on_chip":
        block, on_chip = min(block, rows.ROW_TILE), False
    options = getattr(module, "OPTIONS", ()) if on_chip else ()
    rows.checker(cols, block, on_chip, ITEMSIZE[dtype], options, getattr(module, "MAX_ROWS", 4))(config)
    return None


def table_problems(path) -> list[str]:
    text = path.read_text()
    table = configs.parse(text, path)
    problems = []
    for kernel, entries in table.entries.items():
        for (cols, dtype), (plain, ranges) in entries.items():
            for config in ([plain] if plain else []) + [c for _, _, c in ranges]:
                why = entry_problem(kernel, cols, dtype, config)
                if why:
                    problems.append(f"{kernel} {cols} {dtype} {config}: {why}")
    return problems


@pytest.mark.parametrize("path", sorted(configs.TABLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_committed_table_entry_is_a_config_its_kernel_takes(path, monkeypatch):
    """A table older than a kernel (a switch removed, a space narrowed) would make its runs fall
    back to the rule one case at a time: it is caught here, before it lands, by each kernel's own
    check and the space harness-tune searches (on the GPU's numbers, not the simulator's)."""
    from impls._frameworks.numba import rows as numba_rows
    monkeypatch.setattr(numba_rows, "SIMULATED", False)
    assert configs.parse(path.read_text(), path).gpu, f"{path}: no gpu: line"
    assert table_problems(path) == []


def test_the_nightly_lists_a_changed_config_as_a_finding(tmp_path):
    """harness-nightly --tune: each job's comparison (tune.jsonl in its folder) is read; an entry
    whose search chose another config than the table, or that warns, is a line of the report;
    a job that kept none, or an entry of another form, is a note."""
    import json

    from harness.commands.nightly import tune_findings

    assert tune_findings(tmp_path) == ([], [])                       # no --tune: nothing said
    for job in ("0-op=copy", "1-op=scale"):
        (tmp_path / "tune" / job / ".hydra").mkdir(parents=True)

    def entry(changed, search_us, warnings=()):
        return {"kernel": "cuda copy tuned", "cols": 268435456, "dtype": "float32",
                "search": {"config": {"threads": 512}, "us": search_us},
                "table": {"config": {"threads": 256 if changed else 512}, "us": 720.0},
                "rule": {"config": {"threads": 128}, "us": 800.0}, "changed": changed, "batches": [],
                "warnings": list(warnings)}
    lines = [entry(True, 700.0), entry(False, 720.0), entry(False, 720.0, ["1 of 9 candidates did not run"]),
             {"kernel": "cuda copy tuned", "changed": True}]
    (tmp_path / "tune" / "0-op=copy" / tune.TUNE_FILE).write_text("".join(json.dumps(e) + "\n" for e in lines))
    notes, said = tune_findings(tmp_path)
    assert notes == ["harness-tune: job 1-op=scale kept no comparison: its log (in "
                     f"{tmp_path / 'tune'}/.submitit/ on Slurm) says why",
                     "harness-tune: 4 entries searched in 2 jobs, 2 where the search chose another config than "
                     "the table (findings, not regressions)",
                     "harness-tune: an entry of another form left out (KeyError: 'search')"]
    assert said == ["cuda copy tuned 268435456 float32: search 700.0 us, table 720.0 us (0.972), "
                    "rule 800.0 us (0.875)  CHANGED",
                    "cuda copy tuned 268435456 float32: search 720.0 us, table 720.0 us (1.000), "
                    "rule 800.0 us (0.900)\n    warning: 1 of 9 candidates did not run"]
