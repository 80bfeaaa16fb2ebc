"""`jaxgen run FILE` on the Kubernetes engine: a rendered job run as local processes.

The target's pod spec is rendered exactly as for the cluster; its container's command, args and
env are run as hosts_count processes on this machine: the coordinator becomes 127.0.0.1 and a
free port, the completion index / process id is filled in per process, volumes become local
directories, process 0 serves its metrics on a free port (the others none: they share this
machine), and a failure of any process restarts all of them, as the rendered failure policy
would (trainer/exit_codes.py): a permanent error fails the job at once, a stop signal's 143 and a
lost peer's 141 restart it without using the restart budget, other failures use it. The exit code
is the job's result.

Volumes live as long as on a cluster: an emptyDir is per pod and emptied when the pods restart (so
a restart with the default checkpoint volume starts over, as it would in a cluster); a
PersistentVolumeClaim is a directory under the outputs folder that outlives the run (a rerun
resumes from it). At the end, the job's outputs (model, metrics, summary) are collected from
where the rendered job object records them (its outputs annotations) on process 0's volume into a run
of <outputs>/<name>/ (generator/runstore/), as scripts/run.sh fetches them from a cluster, and their
summary is printed (`jaxgen results`).

plan.py makes the processes of the pod spec, supervise.py runs and restarts them, signals.py stops
them, collect.py keeps their results, run.py puts these together.
"""

from .run import run_local

__all__ = ["run_local"]
