"""Scale of the orchestration on the kwok tier: render, apply and schedule big jobs on fake nodes.

    python -m benchmarks.kwok_scale [--hosts 16,256,1024] [--nodes 1024] [--api-qps QPS] [--output FILE]

Starts a kwok cluster (scripts/cluster/up.sh, JobSet controller included), adds NODES fake CPU
nodes, then for every host count and target (Indexed Job, JobSet): renders the release with jaxgen
(`hosts_count`, 1 device per host), applies it (`kubectl apply --server-side`) and polls until every
pod exists, is bound to a node, is Running, and the headless Service's EndpointSlices list every
pod; then deletes it and waits for its pods to go. kwok completes Job pods after 300 ms; the
rendered pods carry kwok's pod-complete delay annotation so they stay Running while measured.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.procs import REPO_ROOT, write_report

CLUSTER = REPO_ROOT / "scripts" / "cluster"
NAMESPACE = "jax-scale"
TARGETS = ("indexed-job", "jobset")
# up.sh --api-qps of the harness: the controller-manager's default 20 requests/s bounds pod creation
# (1024 pods take over 50 s at 20/s) and the scheduler's 50/s binding; see benchmarks/README.md.
TUNED_API_QPS = 200
HOLD_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "30m"}
IMAGE = "localhost/jax-training/trainer"  # what scripts/image.sh builds


def node(i: int) -> dict:
    name = f"kwok-scale-{i}"
    res = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "kubernetes.io/hostname": name,
                                    "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
            "status": {"allocatable": res, "capacity": res}}


class Kube:
    def __init__(self, kubeconfig: str):
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}

    def __call__(self, *args, stdin: str | None = None, timeout: float = 300) -> str:
        done = subprocess.run(["kubectl", "--namespace", NAMESPACE, *args], env=self.env, input=stdin,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return done.stdout


def poll(what: str, probe, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def add_nodes(kube: Kube, count: int) -> dict:
    started = time.perf_counter()
    for first in range(0, count, 256):  # one apply per 256 nodes keeps each request small
        items = [node(i) for i in range(first, min(count, first + 256))]
        kube("apply", "--server-side", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    created = time.perf_counter() - started

    def ready():
        out = kube("get", "nodes", "-l", "type=kwok", "--no-headers",
                   "-o", "custom-columns=R:.status.conditions[?(@.type=='Ready')].status")
        return out.split().count("True") >= count
    poll(f"{count} fake nodes Ready", ready, timeout=600, interval=1)
    return {"nodes": count, "created_seconds": round(created, 2),
            "ready_seconds": round(time.perf_counter() - started, 2)}


def jaxgen() -> list[str]:
    script = Path(sys.executable).with_name("jaxgen")
    return [str(script)] if script.exists() else [sys.executable, "-m", "generator"]


def variables(name: str, target: str, hosts: int) -> list[str]:
    """seed.json as a release of `hosts` hosts (an image of one's own: the default is not published)."""
    return [str(REPO_ROOT / "variables" / "examples" / "seed.json"),
            "--set", f"target={target}", "--set", f"name={name}", "--set", f"namespace={NAMESPACE}",
            "--set", f"hosts_count={hosts}", "--set", "local_device_count=1", "--set", f"image.repository={IMAGE}",
            "--set", f"training.batch_size={hosts * 8}", "--set-json", f"annotations={json.dumps(HOLD_RUNNING)}"]


def render(name: str, target: str, hosts: int, out: Path) -> float:
    argv = [*jaxgen(), "render", "--format", "json", *variables(name, target, hosts)]
    started = time.perf_counter()
    with out.open("w") as f:
        subprocess.run(argv, cwd=REPO_ROOT, stdout=f, check=True, timeout=120)
    return time.perf_counter() - started


def command_seconds(kube: Kube, argv: list[str], repeats: int = 3) -> float:
    """The median wall time of a jaxgen command against the cluster (which must succeed)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run([*jaxgen(), *argv], cwd=REPO_ROOT, env=kube.env, capture_output=True, text=True,
                              timeout=120)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"jaxgen {argv[0]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return sorted(times)[len(times) // 2]


def measure(kube: Kube, target: str, hosts: int, work: Path, timeout: float) -> dict:
    name = f"scale-{target}-{hosts}"
    manifest = work / f"{name}.json"
    render_seconds = render(name, target, hosts, manifest)
    selector = f"app.kubernetes.io/name=jax-training,app.kubernetes.io/instance={name}"
    marks: dict[str, float] = {}
    started = time.perf_counter()
    kube("apply", "--server-side", "-f", str(manifest))
    marks["applied"] = time.perf_counter() - started
    deadline = started + timeout
    while "running" not in marks or "endpoints" not in marks:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{name}: not all {hosts} pods Running with endpoints after {timeout:.0f} s: {marks}")
        rows = [line.split() for line in kube("get", "pods", "-l", selector, "--no-headers",
                                               "-o", "custom-columns=N:.spec.nodeName,P:.status.phase").splitlines()]
        now = time.perf_counter() - started
        if len(rows) >= hosts:
            marks.setdefault("created", now)
            if all(r[0] != "<none>" for r in rows):
                marks.setdefault("scheduled", now)
            if all(r[1] == "Running" for r in rows):
                marks.setdefault("running", now)
        if "endpoints" not in marks:
            slices = kube("get", "endpointslices", "-l", f"kubernetes.io/service-name={name}",
                          "-o", "jsonpath={range .items[*]}{range .endpoints[*]}{.targetRef.name}{'\\n'}{end}{end}")
            if len(set(slices.split())) >= hosts:
                marks["endpoints"] = time.perf_counter() - started
        time.sleep(0.5)
    # What a user runs against the job while it runs: the preflight of its variables, its status.
    marks["check"] = command_seconds(kube, ["check", *variables(name, target, hosts)])
    marks["status"] = command_seconds(kube, ["status", name, "--namespace", NAMESPACE, "-o", "json"])
    deleted = time.perf_counter()
    kube("delete", "-f", str(manifest), "--wait=false")
    poll(f"{name}'s pods gone", lambda: not kube("get", "pods", "-l", selector, "--no-headers", "-o", "name").strip(),
         timeout=timeout, interval=1)
    result = {"target": target, "hosts": hosts, "render_seconds": round(render_seconds, 3),
              "manifest_bytes": manifest.stat().st_size,
              **{f"{k}_seconds": round(v, 2) for k, v in marks.items()},
              "delete_seconds": round(time.perf_counter() - deleted, 2)}
    return result


def run(hosts: list[int], nodes: int, api_qps: int, timeout: float, log) -> dict:
    with tempfile.TemporaryDirectory(prefix="jaxt-scale-") as work:
        work = Path(work)
        state = work / "cluster"
        args = [str(CLUSTER / "up.sh"), "--state-dir", str(state), "--namespace", NAMESPACE,
                "--owner-pid", str(os.getpid()), "--max-lifetime", "3600"]
        if api_qps:
            args += ["--api-qps", str(api_qps)]
        started = time.perf_counter()
        up = subprocess.run(args, capture_output=True, text=True, timeout=600)
        try:
            if up.returncode != 0:
                raise RuntimeError(f"up.sh exited {up.returncode}: {up.stderr[-2000:]}")
            cluster_seconds = time.perf_counter() - started
            kube = Kube(up.stdout.strip().splitlines()[-1])
            log(f"kwok cluster up in {cluster_seconds:.1f} s; adding {nodes} nodes")
            node_info = add_nodes(kube, nodes)
            log(f"{nodes} nodes Ready in {node_info['ready_seconds']} s")
            runs = []
            for count in hosts:
                for target in TARGETS:
                    r = measure(kube, target, count, work, timeout)
                    log(f"{target} {count} hosts: render {r['render_seconds']} s, apply -> created "
                        f"{r.get('created_seconds')} s, scheduled {r.get('scheduled_seconds')} s, Running "
                        f"{r['running_seconds']} s, endpoints {r['endpoints_seconds']} s; jaxgen check "
                        f"{r['check_seconds']} s, status {r['status_seconds']} s")
                    runs.append(r)
        finally:
            subprocess.run([str(CLUSTER / "down.sh"), str(state)], capture_output=True, timeout=120)
    summary = {f"{r['target'].replace('-', '_')}_{r['hosts']}_running_seconds": r["running_seconds"] for r in runs}
    return {"api_qps": api_qps or None, "cluster_start_seconds": round(cluster_seconds, 1), **node_info,
            "runs": runs, **summary}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.kwok_scale", description=__doc__.split("\n")[0])
    p.add_argument("--hosts", default="16,256,1024", help="comma-separated host counts (default: 16,256,1024)")
    p.add_argument("--nodes", type=int, default=1024, help="fake kwok nodes to add (default: 1024)")
    p.add_argument("--api-qps", type=int, default=TUNED_API_QPS,
                   help=f"up.sh --api-qps for the controller-manager and the scheduler (default: {TUNED_API_QPS}; "
                        "0: their own defaults)")
    p.add_argument("--timeout", type=float, default=300, help="seconds each release may take (default: 300)")
    p.add_argument("--output", help="also write the JSON result to this file")
    args = p.parse_args(argv)
    try:
        hosts = [int(h) for h in args.hosts.split(",")]
    except ValueError:
        p.error(f"--hosts: not a comma-separated list of integers: {args.hosts!r}")

    def log(message: str) -> None:
        print(f"[kwok-scale] {message}", file=sys.stderr, flush=True)

    # SIGTERM and SIGINT unwind like exceptions, so the cluster is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    load_before = os.getloadavg()
    result = run(hosts, args.nodes, args.api_qps, args.timeout, log)
    result["loadavg_before"], result["loadavg_after"] = load_before, os.getloadavg()
    text = json.dumps(result, indent=2)
    if args.output:
        write_report(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
