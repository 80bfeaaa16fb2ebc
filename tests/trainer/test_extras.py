"""A command without its extra names the command that installs the extra here: jax-training is on no
package index, so the extra comes from the checkout (or wheel) this code was installed from, through
the pip of the environment that runs it; and this environment's commands as this shell runs them."""

import json
import os
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from trainer import extras


def install_argv(extra: str) -> list[str]:
    line = extras.missing("no_such_module_anywhere", extra, "jaxgen something")
    prefix = f"jaxgen something needs no_such_module_anywhere, from the '{extra}' extra: "
    assert line.startswith(prefix) and "jax-training[" not in line, line
    return shlex.split(line[len(prefix):])


@pytest.mark.parametrize("extra", ["trainer", "plot", "s3"])
@pytest.mark.parametrize("inside", [True, False])
def test_in_a_checkout_the_extra_comes_from_the_checkout_with_this_environments_pip(extra, inside, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.chdir(REPO_ROOT if inside else tmp_path)
    pip, install, editable, target = install_argv(extra)
    assert (install, editable) == ("install", "-e")
    assert Path(pip).resolve() == (Path(sys.executable).parent / "pip").resolve() and os.access(pip, os.X_OK)
    assert target == (f".[{extra}]" if inside else f"{REPO_ROOT}[{extra}]")
    project = tomllib.loads((Path(target.rpartition("[")[0]) / "pyproject.toml").read_text())["project"]
    assert project["name"] == "jax-training" and extra in project["optional-dependencies"]
    if inside:
        assert not Path(pip).is_absolute()  # .venv/bin/pip, as typed in the checkout


def test_an_installed_wheel_names_the_wheel_and_a_lost_source_says_what_to_give(tmp_path, monkeypatch):
    monkeypatch.setattr(extras, "CHECKOUT", tmp_path / "site-packages")  # no pyproject.toml: not a checkout
    wheel = tmp_path / "dist" / "jax_training-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")

    class Installed:
        def read_text(self, name):
            return json.dumps({"url": wheel.as_uri(), "archive_info": {}}) if name == "direct_url.json" else None

    monkeypatch.setattr(extras.importlib.metadata, "distribution", lambda name: Installed())
    assert install_argv("s3")[1:] == ["install", f"{wheel}[s3]"]
    wheel.unlink()  # installed from a wheel that is gone
    line = extras.missing("no_such_module_anywhere", "s3", "x")
    assert line.endswith("install 'PATH[s3]', PATH being the jax-training checkout or wheel "
                         "(it is on no package index)"), line


def test_no_document_installs_a_package_named_jax_training_from_the_index():
    documents = [REPO_ROOT / "README.md", *REPO_ROOT.glob("docs/**/*.md"), *REPO_ROOT.glob("*/README.md")]
    said = [str(d.relative_to(REPO_ROOT)) for d in documents if "install 'jax-training[" in d.read_text()]
    assert not said
