"""Shared by every test tier."""

import os

import pytest

from tests.support.paths import REPO_ROOT, SHARED_DIR  # noqa: F401  (re-exported for fixtures)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files from the current renders (review the diff by hand)")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With JAXT_NO_SKIP=1 (CI), a skipped test is a failure: every tier must really run."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("JAXT_NO_SKIP") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under JAXT_NO_SKIP=1: {report.longrepr}"
