"""Shared by every test tier."""

import os
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
