"""Chart.yaml's version and appVersion (the version of trainer/__init__.py, its one home) and its
kubeVersion (the lowest supported Kubernetes, generator/kubernetes_versions.py): the lines
scripts/generate.py keeps current in the otherwise hand-written Chart.yaml."""

import re

from generator.kubernetes_versions import LOWEST
from trainer import __version__


def updated(text: str) -> str:
    text = re.sub(r"(?m)^version: .*$", f"version: {__version__}", text)
    text = re.sub(r"(?m)^appVersion: .*$", f'appVersion: "{__version__}"', text)
    return re.sub(r"(?m)^kubeVersion: .*$", f'kubeVersion: ">={LOWEST}-0"', text)

