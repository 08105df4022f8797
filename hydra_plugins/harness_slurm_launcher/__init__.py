"""The Slurm launcher of conf/hydra/launcher/slurm.yaml: submitit's, with its refusals said in
one line (in ``hydra_plugins``: Hydra takes launchers from that package only). When sbatch
refuses the array (a GPU request on a partition without GPUs, an unknown partition, too much
memory), submitit raises and Hydra prints its launcher's traceback; here the run ends with
sbatch's own words, what to change, and exit 4 (the multirun failed)."""
from __future__ import annotations

import sys

MULTIRUN_FAILED = 4

try:   # Hydra imports every plugin as it starts: without the cluster extra there is no launcher here
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _Submitit
    from submitit.core.utils import FailedJobError
except ImportError:
    _Submitit = None


def refused(error: Exception) -> None:
    said = " ".join(str(error).split()) or "no reason given"
    print(f"harness: Slurm refused the jobs: {said}\n  The request is conf/hydra/launcher/slurm.yaml's; "
          "change it on the command line, e.g. hydra.launcher.partition=NAME, "
          "hydra.launcher.gpus_per_node=null (a partition without GPUs), hydra.launcher.mem_gb=N.", file=sys.stderr)
    # SystemExit passes Hydra's handler (it catches Exception), so no traceback follows.
    sys.exit(MULTIRUN_FAILED)


if _Submitit is not None:
    class SlurmLauncher(_Submitit):
        def launch(self, job_overrides, initial_job_idx):
            try:
                return super().launch(job_overrides, initial_job_idx)
            except FailedJobError as e:
                refused(e)
