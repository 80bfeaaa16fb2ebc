"""kubectl, as jaxgen's commands drive it: the user's kubeconfig (KUBECONFIG), `--context` and
`--namespace` passed through, every call bounded, and a failure one line (ClusterError)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...errors import Unreachable, UserError

TIMEOUT = 20  # seconds one call may take
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
NOT_SERVED = ("the server doesn't have a resource type", "could not find the requested resource")


class ClusterError(Unreachable):
    """The cluster cannot be asked (no kubectl, no context, the API server does not answer)."""


class NotFound(UserError):
    pass


# The API server's words for a request RBAC refuses (k8s.io/apiserver, responsewriters.forbiddenMessage).
FORBIDDEN = re.compile(r'User "(?P<user>[^"]*)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group '
                       r'"(?P<group>[^"]*)"(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)?')


def rbac_rule(group: str, resource: str, verbs: list[str]) -> str:
    """A Role's rule, as one line of YAML."""
    return f'{{apiGroups: ["{group}"], resources: ["{resource}"], verbs: [{", ".join(verbs)}]}}'


class Forbidden(ClusterError):
    """The API server answered, and RBAC refuses the user this verb on this resource."""

    def __init__(self, line: str):
        found = FORBIDDEN.search(line)
        self.line = line
        self.user, self.verb, self.resource, self.group, self.namespace = (
            found.group("user", "verb", "resource", "group", "namespace") if found else ("", "", "", "", None))
        super().__init__(f"{self.who()}: {self.rule_line()}" if found else line)

    def who(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "at the cluster scope"
        return f'user "{self.user}" may not {self.verb} {self.resource} ({self.group or "core"} API group) {where}'

    def rule_line(self) -> str:
        kind = "Role" if self.namespace else "ClusterRole"
        return f"a {kind} rule that allows it: {rbac_rule(self.group, self.resource, [self.verb])}"


def forbidden(line: str) -> Forbidden | None:
    """The Forbidden error in kubectl's error line, None where RBAC did not refuse."""
    return Forbidden(line) if FORBIDDEN.search(line) else None


class Kubectl:
    def __init__(self, context: str | None = None, namespace: str | None = None, kubeconfig: str | None = None):
        self.binary = shutil.which("kubectl")
        if self.binary is None:
            raise ClusterError("kubectl: not found on PATH (install kubectl: https://kubernetes.io/docs/tasks/tools/)")
        self.kubeconfig, self.context = kubeconfig, context
        self.global_args = ([f"--kubeconfig={kubeconfig}"] if kubeconfig else []) + (
            [f"--context={context}"] if context else [])
        self.namespace = namespace or self._current_namespace()

    def config_problem(self) -> str:
        """Why no cluster can be asked before kubectl tries (it would try localhost:8080): no
        kubeconfig file, or none with a context; "" where kubectl may try."""
        if self.kubeconfig:
            files, named = [self.kubeconfig], f"--kubeconfig {self.kubeconfig}"
        elif os.environ.get("KUBECONFIG"):
            files = [f for f in os.environ["KUBECONFIG"].split(os.pathsep) if f]
            named = f"KUBECONFIG={os.environ['KUBECONFIG']}"
        else:
            files, named = [str(Path.home() / ".kube" / "config")], "~/.kube/config (KUBECONFIG is unset)"
        if not any(Path(f).is_file() for f in files):
            in_pod = (os.environ.get("KUBERNETES_SERVICE_HOST") and Path(SERVICE_ACCOUNT_TOKEN).is_file()
                      and not self.kubeconfig)  # kubectl's in-cluster config, in a pod
            return "" if in_pod else f"no kubeconfig: {named} names no file"
        if not self.context and not self._config("{.current-context}"):
            return f"no context: {named} has no current-context (pass --context, or kubectl config use-context)"
        return ""

    def where(self) -> str:
        """The context and server kubectl asks, and the kubeconfig they come from, for an error line."""
        context = self.context or self._config("{.current-context}") or "?"
        server = self._config("{.clusters[0].cluster.server}")
        source = (f"--kubeconfig {self.kubeconfig}" if self.kubeconfig else
                  f"KUBECONFIG={os.environ['KUBECONFIG']}" if os.environ.get("KUBECONFIG") else "~/.kube/config")
        return f"context {context}{f' ({server})' if server else ''} of {source}"

    def _config(self, jsonpath: str) -> str:
        proc = self.run("config", "view", "--minify", "-o", f"jsonpath={jsonpath}", namespaced=False, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

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
    if refused := forbidden(line):
        return refused
    if "NotFound" in line or "not found" in line or any(s in line for s in NOT_SERVED):
        return NotFound(line)
    return ClusterError(f"cannot reach the cluster: {line}")
