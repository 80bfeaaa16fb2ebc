"""The chart tells in NOTES, in the one line jaxgen warns with, that a stock Kueue does not manage a
queued JAXJob, unless kueue.jaxjob_integration says the cluster's Kueue enables it."""

from __future__ import annotations

import pytest

from generator.engines.kubernetes import kueue
from generator.targets import KUBERNETES, workload
from tests.support.jaxgen import jaxgen

from .helm import CHART_DIR, helm, write_values


@pytest.mark.parametrize("target", KUBERNETES)
@pytest.mark.parametrize("integration", [False, True])
def test_notes_say_a_queued_job_is_not_managed_exactly_when_jaxgen_warns(target, integration, tmp_path):
    values = {"name": "kq", "namespace": "ml", "target": target, "queue_name": "team",
              "kueue": {"jaxjob_integration": integration}}
    path = write_values(tmp_path, f"{target}-{integration}", values)
    warns = workload(target).kueue_opt_in and not integration
    rendered = jaxgen("render", str(path))
    assert rendered.exit_code == 0
    assert rendered.stderr.count(f"warning: {kueue.UNMANAGED_WARNING}\n") == int(warns)
    result = helm("install", "kq", str(CHART_DIR), "-f", str(path), "--dry-run=client", "--namespace", "ml")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert notes.count(f"warning: {kueue.UNMANAGED_WARNING}\n") == int(warns), notes
