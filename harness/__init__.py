"""kernel-harness: run equivalent kernel implementations, check them, time them against
the measured bandwidth roof, and log every case.

A run, by stage: commands/cli.py reads the config (commands/schema.py), run/plan.py makes
the cases, run/session.py hands them to the workers (run/runner.py, run/worker.py), each
case is checked and timed (measure/: checks, integrity, timing, roofline) and becomes a
record (records/record.py) that the sinks write (records/sinks/) and the readers read
(records/: reader, report, compare, results, summary, regress). launch/ holds the launch
configs (the table per GPU, the search of harness-tune). registry.py is the interface an
impl and a framework implement; entry.py lists the commands."""
__version__ = "0.1.0"
