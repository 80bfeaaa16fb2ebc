"""docs/your-cluster.md's commands, read from its fenced ```sh blocks (an edit of the guide changes
what the real-node test runs), and what the test cluster needs beyond them.

The stock path: step 3's render on a stock image (the one whose build folder step 4 runs), then
every command of steps 4 to 6 in order. Each runs as written, with bash, in a copy of the checkout
(links to its files; the build folder is the copy's own), with the commands installed (the
checkout's .venv first on PATH) and the kube context of the test cluster (KUBECONFIG). The one
change to a command: settings appended to the render, TEST_CLUSTER and the stand-in image's (later
--set wins, as in Helm)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.e2e_k8s.kube import set_option
from tests.support.paths import MNIST_DIR, REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "your-cluster.md"
STOCK_STEPS = ("3.", "4.", "5.", "6.")

# What the test cluster needs beyond the guide's render, appended to it (with the stock fixture's:
# the stand-in image on the node, packages from the host's index, MNIST from a claim, requests that
# fit 2 CPUs, as every real-node run here).
TEST_CLUSTER = [
    'persistence.storage_class="-"',  # the guide's CLASS: a volume on the node's disk, made by the test
    'jobset.exclusive_topology=""',  # one node: the example's two pods may not ask for two
]


def sections(text: str) -> dict[str, str]:
    """The `## ` sections of a guide's text by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def commands(text: str) -> list[str]:
    """The commands of the ```sh blocks of `text`: continuation lines joined, comments and blank
    lines left out."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                found.append(re.sub(r"\s+", " ", line))
    return found


def stock_commands(text: str | None = None) -> list[str]:
    """The stock path's commands of the guide (or of `text`), the render first."""
    steps = {heading.split()[0]: body for heading, body in sections(text or GUIDE.read_text()).items()}
    missing = [step for step in STOCK_STEPS if step not in steps]
    assert not missing, f"{GUIDE.name} has no step {missing}"
    later = [c for step in STOCK_STEPS[1:] for c in commands(steps[step])]
    builds = {c.split()[-1] for c in later if c.startswith("scripts/run.sh ")}
    renders = [c for c in commands(steps[STOCK_STEPS[0]])
               if c.startswith("scripts/prepare.sh ") and "image.source=stock" in c and build_folder(c) in builds]
    assert len(renders) == 1, f"{GUIDE.name} step 3: one stock render of the folder step 4 runs, not {renders}"
    assert later, f"{GUIDE.name}: no commands in steps 4 to 6"
    return [renders[0], *later]


def build_folder(render: str) -> str | None:
    """The folder a prepare.sh line writes (its -o), or None."""
    found = re.search(r" -o (\S+)", render)
    return found.group(1) if found else None


def release_name(render: str) -> str:
    """The `name` of the variables file the render reads."""
    example = shlex.split(render)[1]
    return json.loads((REPO_ROOT / example).read_text())["name"]


def target(checkout: Path, render: str) -> str:
    """The target the render wrote (its build folder's release.env)."""
    env = (checkout / build_folder(render) / "release" / "release.env").read_text()
    return re.search(r"^TARGET=(\S+)$", env, re.MULTILINE).group(1).strip("'\"")


def appended(sets: list[str], target_override: str | None) -> str:
    """The render's appended settings, shell-quoted."""
    args = [a for s in sets for a in (set_option(s), s)]
    if target_override:
        args += ["--target", target_override]
    return " " + shlex.join(args)


def checkout_copy(folder: Path) -> Path:
    """A folder of links to the checkout's entries: the guide's relative paths resolve, and its build
    folder is written here, not into the checkout."""
    folder.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name != "rendered":
            (folder / entry.name).symlink_to(entry)
    return folder


def environment(cluster_env: dict, cache: Path) -> dict:
    """The cluster's environment (KUBECONFIG), the checkout's commands first on PATH, and a jax-training
    cache of links to this machine's with MNIST in it (as `make demo` leaves it; the reader's
    `jax-trainer evaluate` downloads the test set, which this host cannot)."""
    real = Path(subprocess.run(["bash", "-c", f'source {REPO_ROOT}/scripts/lib/common.sh; echo "$JAXT_CACHE"'],
                               capture_output=True, text=True, check=True).stdout.strip())
    cache.mkdir()
    for entry in real.iterdir():
        if entry.name != "mnist":
            (cache / entry.name).symlink_to(entry)
    (cache / "mnist").symlink_to(MNIST_DIR)
    return {**cluster_env, "JAXT_CACHE": str(cache),
            "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{cluster_env.get('PATH', os.defpath)}"}


def run(command: str, checkout: Path, env: dict, timeout: int) -> str:
    """One command with bash in the checkout's copy: exit 0; its stdout and stderr."""
    done = subprocess.run(["bash", "-c", command], check=False, cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command}\nexited {done.returncode}:\n{output[-6000:]}"
    return output
