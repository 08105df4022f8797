"""The row tuner (harness-tune's search for a row kernel: softmax, the norms), whose config
decides each row's reduction tree and so its bits: they are chosen once per row length and
dtype, on scratch problems of fixed sizes, whatever the batch (batch invariance); a batch
may then take any config that wrote the same bits on the tuning problem (harness.launch.tuner)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from harness.run import progress

from harness.launch import tuner
from harness.launch.tuner import (BATCH_MEASURED_BELOW, MID_ROWS, SCRATCH_BYTES, SMALL_ROWS, SMALL_SLACK, TOGGLE_SLACK,
                           Tuned, choices, choose, chosen, config_of, effort, fastest_of_its_bits,
                           neutral_but_not_same, observed, ran, same_bits, search)

_batch_choices: dict = {}   # this process's choice per (key, batch)


@dataclass
class RowSpace:
    """What a framework gives the row tuner for one kernel, row length and dtype.

    ``shapes``: the configs measured first, each on the large problem (their bits may
    differ). ``small_batch``: bit-neutral toggles that may help a batch too small to fill
    the GPU, tried on every config whose bits could be chosen. ``path``: toggles tried in
    turn on the fastest config so far without the small-batch ones (a greedy path).
    ``batch``: functions of a config giving the alternatives a batch of its own size tries
    on its fastest config, each from the best so far. ``applicable(config, toggle)``: the
    part of ``toggle`` that applies to ``config``. ``scratch(rows)``: arguments for a batch
    of ``rows`` (the output last: its bits are digested); ``bind(config, args, rows)``: a
    launcher. ``cols``: the row length; ``row_bytes``: one scratch row's bytes, to size the
    ~256 MiB problem. ``neutral``: the switches that change no bits. ``precompile(configs,
    problems)``: build them all, on each problem of ``problems`` ([(args, rows)]), before
    they are timed (in parallel where the framework can)."""
    label: str
    cols: int
    shapes: list[dict]
    scratch: Callable
    bind: Callable
    row_bytes: int
    neutral: tuple[str, ...]
    small_batch: list[dict] = field(default_factory=list)
    path: list[dict] = field(default_factory=list)
    batch: tuple = ()
    applicable: Callable = lambda config, toggle: toggle
    precompile: Callable | None = None
    unrunnable: tuple = ()
    device: object = None


def problems(space: RowSpace) -> dict:
    """The rows of the tuning problems by their time's name: ~256 MiB, MID_ROWS, SMALL_ROWS."""
    large = max(1, SCRATCH_BYTES // space.row_bytes)
    return {"us": large, "mid_us": min(MID_ROWS, large), "small_us": min(SMALL_ROWS, large)}


def tune_rows(key, space: RowSpace) -> Tuned:
    """Tune a row kernel once per ``key`` (op, variant, row length, dtype) on a scratch
    problem of ~256 MiB, a MID_ROWS batch and a SMALL_ROWS batch, whatever the batch at
    hand: the choice, and so every row's bits, depend on the row length and dtype only,
    never on the number of rows (batch invariance); each batch size then takes the config
    of those bits fastest on the problem nearest to it (Tuned.for_rows).

    Every shape on the large problem, digesting the bits it wrote; the shapes whose bits
    run within TOGGLE_SLACK of the fastest there again with each small-batch toggle; then
    the greedy path's toggles from the choice without them; then choose. The small batches
    are timed for the configs of the bits that choose may take (within SMALL_SLACK of the
    fastest on the large problem), or for every config when searched exhaustively."""
    if key not in choices:
        chosen(key, RowSearch(space).run())
    return choices[key]


class RowSearch:
    """One row kernel's search (tune_rows): the candidates measured so far, each with its
    times on the problems it ran (None: not timed there) and the bits it wrote."""

    def __init__(self, space: RowSpace):
        self.space, self.work = space, effort()
        self.rows = problems(space)
        self.args = {p: space.scratch(n) for p, n in self.rows.items()}
        self.samples = {"us": (self.work.large_samples, self.work.large_seconds),
                        "mid_us": (self.work.small_samples, self.work.small_seconds),
                        "small_us": (self.work.small_samples, self.work.small_seconds)}
        self.candidates: list[dict] = []
        self.launches: dict = {}

    def run(self) -> Tuned:
        space, started = self.space, time.perf_counter()
        progress.phase(f"tuning {space.label}: {len(space.shapes)} shapes")
        self.large(space.shapes)
        self.small(self.to_time_small())
        self.everywhere([{**config_of(c), **t} for c in self.near(TOGGLE_SLACK) for t in space.small_batch
                         if space.applicable(config_of(c), t) == t])
        # The path runs on configs without the small-batch switches, which are measured above
        # for the small batches' sake: one of them leading it would keep the path from ever
        # trying the large problem's own toggles without it.
        path = config_of(self.choice(self.plain()))
        for toggle in space.path:
            if toggle := space.applicable(path, toggle):
                self.everywhere([{**path, **toggle}])
            path = config_of(self.choice(self.plain()))
        best = self.choice(self.candidates)
        table = {"problems": {p: f"{n}x{space.cols}" for p, n in self.rows.items()},
                 "candidates": self.candidates, "search": search()}
        if broken := neutral_but_not_same(self.candidates, space.neutral):
            table["bit_neutral_changed_bits"] = broken   # a switch called neutral is not: say so
        batches = [[self.rows["us"], None]] + [
            [self.rows[p], fastest_of_its_bits(self.candidates, best, p, space.neutral)] for p in ("mid_us", "small_us")]
        table["seconds"] = round(time.perf_counter() - started, 3)
        return Tuned(config_of(best), table, batches)

    def plain(self) -> list[dict]:
        """The candidates without the small-batch switches."""
        return [c for c in self.candidates if not any(c.get(s) for t in self.space.small_batch for s in t)]

    def launcher(self, cfg: dict, problem: str):
        k = (repr(sorted(cfg.items())), problem)
        if k not in self.launches:
            self.launches[k] = self.space.bind(cfg, self.args[problem], self.rows[problem])
        return self.launches[k]

    def time_on(self, c: dict, problem: str) -> None:
        c[problem] = tuner.measure(self.launcher(config_of(c), problem), *self.samples[problem], self.space.unrunnable)

    def precompile(self, configs: list[dict], on: list[str]) -> None:
        if self.space.precompile and configs:
            self.space.precompile(configs, [(self.args[p], self.rows[p]) for p in on])

    def large(self, configs: list[dict]) -> list[dict]:
        """Each config not measured yet, on the large problem, its bits digested."""
        fresh: list[dict] = []
        for cfg in configs:
            if all(config_of(c) != cfg for c in self.candidates) and cfg not in fresh:
                fresh.append(cfg)
        self.precompile(fresh, ["us"])
        for cfg in fresh:
            c = {**cfg, "us": None, "mid_us": None, "small_us": None}
            self.time_on(c, "us")
            c.update(observed(self.launcher(cfg, "us"), self.args["us"], c["us"] is not None))
            self.candidates.append(c)
        return self.candidates[len(self.candidates) - len(fresh):]

    def near(self, slack: float) -> list[dict]:
        """The configs of the bits within ``slack`` of the fastest on the large problem."""
        on_large = [c for c in self.candidates if c["us"] is not None]
        if not on_large:
            raise RuntimeError(f"no config ran for {self.space.label}: {[config_of(c) for c in self.candidates]}")
        fastest = min(c["us"] for c in on_large)
        close = [c for c in on_large if c["us"] <= fastest * (1 + slack)]
        return [c for c in on_large if any(same_bits(c, n, self.space.neutral) for n in close)]

    def to_time_small(self) -> list[dict]:
        """choose rates only the bits within SMALL_SLACK (every config, searched exhaustively)."""
        if self.work.every_problem:
            return [c for c in self.candidates if c["us"] is not None]
        return self.near(SMALL_SLACK)

    def small(self, cs: list[dict]) -> None:
        todo = [c for c in cs if c["us"] is not None and c["mid_us"] is None]
        self.precompile([config_of(c) for c in todo], ["mid_us", "small_us"])
        for c in todo:
            self.time_on(c, "mid_us")
            self.time_on(c, "small_us")

    def everywhere(self, configs: list[dict]) -> None:
        """On the large problem, then on the small ones if it contends."""
        added, timed = self.large(configs), self.to_time_small()
        self.small([c for c in added if any(c is n for n in timed)])

    def choice(self, cs: list[dict]) -> dict:
        """choose, the small batches timed first for bits that became choosable."""
        self.small(self.to_time_small())
        return choose(cs, self.space.neutral)


def _takes_the_tuned_config(rows: int, problems: list[int]) -> bool:
    """A tuning problem's batch, or one from BATCH_MEASURED_BELOW of the large problem's
    rows up to the large problem's: for_batch takes the config tuned there unmeasured."""
    largest = max(problems)
    return rows in problems or BATCH_MEASURED_BELOW * largest <= rows <= largest


def family(tuned: Tuned, neutral: tuple[str, ...]) -> list[dict]:
    """The measured candidates that wrote the chosen config's bits, the chosen one first;
    empty without a table (nothing measured) or with one alone."""
    timed = ran(tuned.table.get("candidates", []))
    first = next((c for c in timed if config_of(c) == tuned.config), None)
    if first is None:
        return []
    members = [first] + [c for c in timed if c is not first and same_bits(c, first, neutral)]
    return members if len(members) > 1 else []


def for_batch(tuned: Tuned, key, rows: int, space: RowSpace) -> tuple[dict, dict]:
    """(config, its measurements) for a batch of ``rows``: a tuning problem's rows, or a
    batch from BATCH_MEASURED_BELOW of the large problem's rows up to its size, takes the
    config tuned there (Tuned.for_rows); any other batch the config of the chosen bits
    fastest on a scratch batch of its own size, then that config with each of
    ``space.batch``'s alternatives. Only a config that wrote the chosen config's bits there
    too may serve it: the bits never depend on the batch."""
    problems = [n for n, _ in tuned.batches]
    if not problems or _takes_the_tuned_config(rows, problems):
        return tuned.for_rows(rows), {}
    members = family(tuned, space.neutral)
    if not members:
        return tuned.for_rows(rows), {}
    memo = (*key, rows)
    if memo not in _batch_choices:
        _batch_choices[memo] = _search_batch(members, rows, space)
    return _batch_choices[memo]


def _search_batch(members: list[dict], rows: int, space: RowSpace) -> tuple[dict, dict]:
    started = time.perf_counter()
    progress.phase(f"tuning {space.label}: the config of a {rows}-row batch")
    work = effort()
    args = space.scratch(rows)
    measured: list[dict] = []

    def time_each(configs):
        configs = [cfg for cfg in configs if all(config_of(m) != cfg for m in measured)]
        if space.precompile and configs:
            space.precompile(configs, [(args, rows)])
        for cfg in configs:
            launch = space.bind(cfg, args, rows)
            us = tuner.measure(launch, work.small_samples, work.small_seconds, space.unrunnable)
            measured.append({**cfg, "us": us, **observed(launch, args, us is not None)})

    def fastest():   # of those that wrote the chosen config's bits (the one timed first)
        same = [m for m in measured if m["us"] is not None and m["bits"] == measured[0]["bits"]]
        if not same:
            raise RuntimeError(f"the chosen config of {space.label} did not run a batch of {rows} rows: {measured}")
        return min(same, key=lambda m: m["us"])

    time_each([config_of(c) for c in members])
    for alternatives in space.batch:
        lead = config_of(fastest())
        time_each([{**lead, **a} for a in alternatives(lead)])
    best = fastest()
    batch = {"rows": rows, "candidates": measured, "seconds": round(time.perf_counter() - started, 3)}
    return {**config_of(best), "tuned_for_rows": rows}, batch
