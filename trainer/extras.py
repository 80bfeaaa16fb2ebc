"""The pip extra each command needs: a command run without it says so in one line, not in a traceback
from an import (the package alone installs jaxgen; the trainer and plot extras add jax and matplotlib),
with the command that installs it here. jax-training is on no package index: the extra comes from the
checkout or the wheel this code was installed from, into the environment that runs it. Also how to
run this environment's commands from the current shell (a checkout's .venv/bin is on no PATH)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "jax-training"
CHECKOUT = Path(__file__).resolve().parents[1]  # a checkout when its pyproject.toml is there


def shown(path: Path | str) -> str:
    """`path` as a user types it here: relative to the current folder when inside it, else absolute."""
    path = Path(os.path.abspath(path))
    try:
        relative = path.relative_to(Path.cwd())
    except (ValueError, OSError):
        return str(path)
    return str(relative) if relative.parts and relative.parts[0] != ".." else "."


def runnable(name: str) -> str:
    """How to run this environment's command `name` from this shell: its name when PATH finds this very
    command (make install links them), else its path in the environment's bin."""
    own = Path(sys.executable).parent / name
    if not own.is_file():
        return name
    found = shutil.which(name)
    if found and Path(found).resolve() == own.resolve():
        return name
    path = shown(own)
    return shlex.quote(path if "/" in path else f"./{path}")


def _source() -> tuple[str, bool] | None:
    """(the checkout or wheel this code comes from, whether an editable install takes it), or None."""
    if (CHECKOUT / "pyproject.toml").is_file():
        return shown(CHECKOUT), True
    try:
        origin = json.loads(importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        return None
    url = urlparse(origin.get("url", ""))
    if url.scheme != "file" or not Path(unquote(url.path)).exists():
        return None
    return shown(unquote(url.path)), bool(origin.get("dir_info", {}).get("editable"))


def install_command(extra: str) -> str:
    """The command that installs `extra` into the environment running this code."""
    pip = Path(sys.executable).parent / "pip"
    pip = shlex.quote(shown(pip)) if pip.is_file() else f"{shlex.quote(shown(sys.executable))} -m pip"
    source = _source()
    if source is None:
        return (f"{pip} install 'PATH[{extra}]', PATH being the jax-training checkout or wheel "
                "(it is on no package index)")
    where, editable = source
    return f"{pip} install {'-e ' if editable else ''}{shlex.quote(f'{where}[{extra}]')}"


def missing(module: str, extra: str, command: str) -> str | None:
    """None when `module` can be imported, else the line that names the extra which installs it."""
    if importlib.util.find_spec(module) is not None:
        return None
    return f"{command} needs {module}, from the '{extra}' extra: {install_command(extra)}"
