"""The config schema (harness.commands.schema): one declaration gives --help, the key checks and the
frameworks' settings, which reach the processes that run cases in their start message."""
import dataclasses
import os

import pytest
import torch

from harness.commands import keys, options, schema

from harness.run import plan

from harness import registry
from harness.errors import ConfigError
from harness.run.runner import CaseSpec, Runner, Settings, base_record


def test_help_lists_every_key_of_the_schema_with_its_doc():
    text = options.help_text()
    for name, f, kind in schema.walk(schema.current()):
        group = kind is not None and dataclasses.is_dataclass(kind)
        if group or name.startswith("sweep.timing."):   # a group; the timing budget's doc stands for its keys
            continue
        doc = f.metadata.get("doc")
        assert doc, f"{name} has no doc"
        shown = "ops.<op>.params.<name>" if name == "ops" else name
        assert f"  {shown}=" in text and doc in text, name
    assert "sweep.timing.<name>=" in text


def test_an_unknown_key_under_a_framework_names_its_settings():
    with pytest.raises(ConfigError, match=r"unknown key 'frameworks.torch_compile.shape' \(did you mean "
                                          r"'frameworks.torch_compile.shapes'\?\); frameworks.torch_compile has: shapes"):
        keys.check(["op=rmsnorm", "frameworks.torch_compile.shape=static"], plan.CONF_DIR)


@pytest.fixture
def configured(monkeypatch):
    monkeypatch.setenv("HARNESS_PLUGINS", "tests.plugins.configured")   # the spawned worker imports it too
    registry.frameworks()
    yield
    registry.configure({})


@pytest.mark.parametrize("isolate", [True, False])
def test_a_framework_setting_reaches_the_case_in_the_start_message_not_the_environment(configured, isolate):
    from harness.run.worker import IsolatedRunner
    settings = Settings(seeds=1, determinism_runs=2, batch_invariance=False, contract=False,
                        frameworks={"configured": {"mode": "marked_mode_value"}})
    device = torch.device("cpu")
    runner = IsolatedRunner(device, settings, case_timeout_s=120) if isolate else Runner(device, settings)
    try:
        rec = runner.run(CaseSpec("copy", "configured", "-", "float32", (64,)))
    finally:
        if isolate:
            runner.stop()
    assert rec.status == "ok", rec.reason
    assert rec.impl_config["mode"] == "marked_mode_value" and rec.series == "configured[marked_mode_value]"
    assert rec.impl_config["in_environment"] is False
    assert (rec.impl_config["pid"] != os.getpid()) == isolate


def test_a_series_setting_names_the_series_of_every_record_and_its_default_none(configured):
    """Records of a framework at a series setting's other value are a series of their own,
    also those of cases that did not run (the record a case starts from, base_record); at the
    setting's default, the impl's."""
    def series(frameworks, skip=None):
        spec = CaseSpec("copy", "configured", "-", "float32", (64,), skip_reason=skip)
        return base_record(spec, "cpu", Settings(frameworks=frameworks), {}).series
    marked = {"configured": {"mode": "marked_mode_value"}}
    assert series(marked) == series(marked, skip="not here") == "configured[marked_mode_value]"
    assert series({}) == series({"configured": {"mode": "plain"}}) == "configured"


def test_a_series_setting_that_is_no_setting_is_refused_naming_the_framework_and_the_key():
    from harness.registry import Framework

    @dataclasses.dataclass
    class Knobs:
        mode: str = "a"

    with pytest.raises(ValueError, match=r"framework Misdeclared: series_settings \['shape'\] are not fields of its "
                                         r"settings_schema \(mode\)"):
        class Misdeclared(Framework):   # no name: not registered, only checked
            settings_schema = Knobs
            series_settings = ("shape",)
