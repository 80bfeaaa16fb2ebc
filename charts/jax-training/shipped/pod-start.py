"""The first container of a pod whose job ships code (image.source stock, program.dir): it unpacks what
the job's ConfigMap carries into the pod's run folder and, on a stock image, installs the pinned
packages the image lacks there. Standard library only: it runs on any image with Python and pip.

Usage: python pod-start.py SHIPPED RUN [PIP_OPTION...]
  SHIPPED  the ConfigMap's folder: trainer.tar.gz, program.tar.gz, stock-requirements.txt (each optional)
  RUN      the pod's run folder (an emptyDir the trainer's container mounts too): trainer/, packages/, program/
Exit 0, or 1 with one line on stderr (the pod's init container fails and the job's pods say why).
"""

import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile

REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")


def unpack(archive: str, into: str) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # refuses links and paths that leave the folder
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)


def installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def lacking(requirements: str) -> list[str]:
    """The lines of the pinned requirements whose distribution the image does not have; those it has
    stay as the image's (their versions are the image's business, the trainer checks JAX's)."""
    lines = []
    with open(requirements) as text:
        for line in text:
            match = REQUIREMENT.match(line)
            if match and not installed(match.group(1)):
                lines.append(line.strip())
    return lines


def main(shipped: str, run: str, pip_options: list[str]) -> None:
    for name, into in (("trainer", run), ("program", os.path.join(run, "program"))):
        archive = os.path.join(shipped, f"{name}.tar.gz")
        if os.path.exists(archive):
            unpack(archive, into)
    requirements = os.path.join(shipped, "stock-requirements.txt")
    if not os.path.exists(requirements):
        return
    missing = lacking(requirements)
    if not missing:
        print("pod-start: the image has every package the trainer needs", flush=True)
        return
    names = [REQUIREMENT.match(line).group(1) for line in missing]
    print(f"pod-start: installing what the image lacks: {', '.join(names)}", flush=True)
    wanted = os.path.join(run, "requirements.txt")
    with open(wanted, "w") as out:
        out.write("\n".join(missing) + "\n")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes",
               "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
               "--target", os.path.join(run, "packages"), "-r", wanted, *pip_options]
    if subprocess.run(command).returncode:
        sys.exit(f"pod-start: pip could not install {', '.join(names)} with image.pip_args "
                 f"{pip_options or '(none: PyPI)'}; the pods need that index, or image.source built")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
