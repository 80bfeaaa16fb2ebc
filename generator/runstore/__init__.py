"""The run store: where the jobs of `jaxgen run` and the results fetched from a cluster are kept, and
where a job's outputs are, as its render recorded it. The local runner (generator/engines/kubernetes/
local/) writes it; `jaxgen status|list|logs --local` and `jaxgen results` read it.

    location.py   where a job's outputs are: <checkpoint.dir>/<name>, and the bucket's <uri>/<name>,
                  decided once from the variables (the job object's annotations, release.env, a run's record)
    runs.py       a job's folder of runs, <outputs>/<name>/<run id>: ids, the lock, records, `latest`
    intake.py     a local run taken in: process 0's outputs, its logs and its record, as a run of its own
    confined.py   copies out of a job's outputs that never follow a link (also run.sh's copy from a claim)
    local.py      `jaxgen status|list|logs --local`: the runs under an outputs folder
"""
