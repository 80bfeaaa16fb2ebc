"""Shared by every test tier."""

import os
from collections import Counter
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT, SHARED_DIR  # noqa: F401  (re-exported for fixtures)

TESTS_DIR = Path(__file__).parent
# The tiers that need a real engine (a Kubernetes control plane, SLURM) started by the project's scripts.
E2E_TIERS = ("e2e_k8s", "e2e_slurm")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files from the current renders (review the diff by hand)")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture(autouse=True)
def no_kube_context(request, monkeypatch, tmp_path_factory):
    """Outside the e2e tiers no kube context reaches a test: jaxgen render and helm template take the
    context's namespace, so a developer's ~/.kube/config naming one would change every render."""
    if request.node.get_closest_marker("e2e") is None:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path_factory.getbasetemp() / "no-kubeconfig"))
        monkeypatch.delenv("HELM_NAMESPACE", raising=False)


@pytest.fixture(autouse=True, scope="session")
def one_decoded_mnist(tmp_path_factory):
    """Every trainer a test starts maps one decoded copy of MNIST (trainer/data.py), not 55 MB in each
    run's outputs; a test of the default leaves the variable out (tests/support/procs.py start)."""
    from trainer.data import DECODED_DATA_ENV

    mp = pytest.MonkeyPatch()
    mp.setenv(DECODED_DATA_ENV, str(tmp_path_factory.getbasetemp() / "decoded-data"))
    yield
    mp.undo()


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.is_relative_to(TESTS_DIR) and item.path.relative_to(TESTS_DIR).parts[0] in E2E_TIERS:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With JAXT_NO_SKIP=1 (CI), a skipped test is a failure: every tier must really run."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("JAXT_NO_SKIP") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under JAXT_NO_SKIP=1: {report.longrepr}"


# Seconds spent per test file (set-up, call and tear-down), for the summary of what each tier costs.
_SECONDS = Counter()


def pytest_runtest_logreport(report):
    _SECONDS[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    """What each tier (tests/<tier>/) and its slowest files cost in this session: make test's lanes
    print it, so every full run says where its time went."""
    if not _SECONDS:
        return
    tiers = Counter()
    for path, seconds in _SECONDS.items():
        parts = Path(path).parts
        tiers[parts[1] if len(parts) > 2 and parts[0] == "tests" else path] += seconds
    write = terminalreporter.write_line
    terminalreporter.section("time per tier")
    write(", ".join(f"{tier} {seconds / 60:.1f} min" for tier, seconds in tiers.most_common()))
    write("slowest files: " + ", ".join(f"{path} {seconds:.0f} s" for path, seconds in _SECONDS.most_common(12)))
