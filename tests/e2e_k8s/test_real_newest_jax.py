"""The newest JAX in real pods: the trainer image on a Debian trixie base (Python 3.13, the JAX line
trainer/constraints.txt pins for Python 3.12 and later; scripts/image.sh --debian trixie) trains on
every Kubernetes target. The four jobs train at once, a fifth of an epoch each, to keep the tier
lean; the default image's full runs are test_real_pods.py's."""

from __future__ import annotations

import subprocess

import pytest

from generator.targets import KUBERNETES
from tests.e2e_k8s.kube import SCRIPTS, prepare, start_run
from tests.e2e_k8s.real import containerd_cli, final_accuracy, trained
from tests.support.constraints import pinned_for

EXAMPLES = 12800  # 100 steps of cpu-local.json's batch
MIN_ACCURACY = 0.9


@pytest.fixture(scope="session")
def trixie_image() -> tuple[str, str]:
    """The trixie image (built once, cached by content like the default one): its name and archive."""
    def image_sh(*args: str) -> str:
        proc = subprocess.run([str(SCRIPTS / "image.sh"), "--debian", "trixie", *args], capture_output=True,
                              text=True, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc.stdout.strip()
    return image_sh(), image_sh("--print-archive")


@pytest.fixture
def newest(real, trixie_image):
    """The real node with the trixie image imported, and the --set overrides that run it."""
    cluster, sets = real
    image, archive = trixie_image
    ctr = containerd_cli()
    if image not in cluster.run([*ctr, "images", "ls", "-q"]).stdout.split():
        cluster.run([*ctr, "images", "import", archive], timeout=300)
    return cluster, [*sets, f"image.tag={image.rsplit(':', 1)[1]}"]


# The four jobs run at once: 8 trainers on the node's 2 CPUs, so each requests less than the others'.
SHARED_NODE = 'resources={"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "3Gi"}}'


@pytest.mark.timeout(900)
def test_the_newest_jax_trains_on_every_target(newest, tmp_path):
    cluster, sets = newest
    builds = {target: tmp_path / target for target in KUBERNETES}
    for target, build in builds.items():
        prepare(cluster, build, f"real-newest-{target}", *sets, SHARED_NODE, f"training.train_examples={EXAMPLES}",
                base="cpu-local.json", target=target)
    runs = {target: start_run(cluster, build, timeout=600) for target, build in builds.items()}
    try:
        outputs = {target: trained(run, 600) for target, run in runs.items()}
    finally:
        for run in runs.values():
            if run.poll() is None:
                run.kill()
    for target, output in outputs.items():
        assert f", jax {pinned_for('jax', '3.13')}" in output, (target, output[-3000:])  # rank 0 ran the newest jax
        assert final_accuracy(output) >= MIN_ACCURACY, (target, output[-3000:])
    for target, build in builds.items():
        cluster.run([SCRIPTS / "clean.sh", build], timeout=180)
        assert cluster.release_objects(f"real-newest-{target}") == []
