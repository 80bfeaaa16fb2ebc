"""Reading a rendered sbatch script back: its #SBATCH directives and its srun command line."""

from __future__ import annotations

import shlex


def directives(script: str) -> dict[str, str]:
    """`#SBATCH --key=value` lines as {key: value} (sbatch reads them until the first command)."""
    found: dict[str, str] = {}
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH "):
            key, _, value = line[len("#SBATCH "):].strip().partition("=")
            found[key.removeprefix("--")] = value
        elif line.strip() and not line.startswith("#"):
            break
    return found


def srun_words(script: str) -> list[str]:
    """The srun command (continuation lines joined), split as bash would."""
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("srun "))
    command = ""
    for line in lines[start:]:
        command += line.rstrip("\\").rstrip() + " "
        if not line.endswith("\\"):
            break
    return shlex.split(command)
