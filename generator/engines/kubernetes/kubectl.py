"""kubectl, as jaxgen's commands drive it: the user's kubeconfig (KUBECONFIG), `--context` and
`--namespace` passed through, every call bounded, and a failure one line (ClusterError)."""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from ...errors import Unreachable, UserError

TIMEOUT = 20  # seconds one call may take
NOT_SERVED = ("the server doesn't have a resource type", "could not find the requested resource")


class ClusterError(Unreachable):
    """The cluster cannot be asked (no kubectl, no context, the API server does not answer)."""


class NotFound(UserError):
    pass


class Kubectl:
    def __init__(self, context: str | None = None, namespace: str | None = None, kubeconfig: str | None = None):
        self.binary = shutil.which("kubectl")
        if self.binary is None:
            raise ClusterError("kubectl: not found on PATH (install kubectl: https://kubernetes.io/docs/tasks/tools/)")
        self.global_args = ([f"--kubeconfig={kubeconfig}"] if kubeconfig else []) + (
            [f"--context={context}"] if context else [])
        self.namespace = namespace or self._current_namespace()

    def _current_namespace(self) -> str:
        out = self.run("config", "view", "--minify", "-o", "jsonpath={..namespace}", namespaced=False, check=False)
        return out.stdout.strip() or "default"

    def run(self, *args: str, namespaced: bool = True, check: bool = True, timeout: float = TIMEOUT,
            stdin: str | None = None) -> subprocess.CompletedProcess:
        argv = [self.binary, *self.global_args, *([f"--namespace={self.namespace}"] if namespaced else []), *args]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"kubectl {args[0]}: no answer from the cluster in {timeout:g} s") from None
        if check and proc.returncode != 0:
            raise error_of(proc.stderr)
        return proc

    def get(self, *args: str, namespaced: bool = True) -> dict:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self.run("get", *args, "-o", "json", namespaced=namespaced).stdout)

    def items(self, resource: str, selector: str = "") -> list[dict]:
        """The objects of a resource in the namespace; [] where the cluster does not serve the resource."""
        try:
            return self.get(resource, *(["-l", selector] if selector else []))["items"]
        except NotFound:
            return []

    def many(self, calls: list) -> list:
        """Independent calls (functions of no argument) at once: a status reads several objects."""
        with ThreadPoolExecutor(max_workers=max(len(calls), 1)) as pool:
            return list(pool.map(lambda call: call(), calls))

    def raw(self, path: str, timeout: float = TIMEOUT, request_timeout: str | None = None) -> str:
        """GET path from the API server as it answers (no conversion: a list of 1000 pods stays fast)."""
        extra = [f"--request-timeout={request_timeout}"] if request_timeout else []
        return self.run("get", "--raw", path, *extra, namespaced=False, timeout=timeout).stdout

    def pods(self) -> list[dict]:
        """Every pod of the namespace."""
        return json.loads(self.raw(f"/api/v1/namespaces/{self.namespace}/pods"))["items"]


def error_of(stderr: str) -> UserError:
    """kubectl's last error line, as the error a command reports."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "kubectl failed"
    line = line.removeprefix("error: ").removeprefix("Error from server ")
    if "NotFound" in line or "not found" in line or any(s in line for s in NOT_SERVED):
        return NotFound(line)
    return ClusterError(f"cannot reach the cluster: {line}")
