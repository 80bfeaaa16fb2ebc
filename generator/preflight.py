"""`jaxgen check FILE`: before anything is applied, ask the cluster for every piece this render needs
(the engine's check, generator/engines/kubernetes/preflight.py) and name what to install or set, one
line each.
Exit 0 when everything is there, 2 when something is missing (or the variables are invalid), 3 when
the cluster cannot be asked (no kubeconfig, no context, no answer): one line says so, naming the
kubeconfig and context, and the checks that need no cluster (the values' schema and rules, the
image) still run and print their lines. scripts/run.sh runs it before it applies."""

from __future__ import annotations

import sys

import click

from .options import variables_files, variables_options

EXIT_MISSING, EXIT_UNREACHABLE = 2, 3


@click.command("check")
@variables_options()
@click.option("--kubeconfig", metavar="FILE", help="The kubeconfig (default: $KUBECONFIG, then ~/.kube/config).")
@click.option("--context", metavar="CONTEXT", help="The kubeconfig context (default: the current one).")
@click.option("-n", "--namespace", metavar="NS",
              help="The namespace (default: the file's namespace, else the context's).")
def check_command(file, extra_files, sets, set_strings, set_jsons, target, kubeconfig, context, namespace):
    """Check that the cluster has what FILE's render needs: the target's API and a live controller
    (and a TrainJob's ClusterTrainingRuntime), the namespace and its admission of every object of
    the render and of the pods (server-side dry runs: nothing is created; an object the namespace's
    RBAC refuses is named with the Role rule that allows it), the LocalQueue and Kueue's integration, a
    StorageClass or the existing claim (a warning where several hosts on several nodes share a
    ReadWriteOnce claim), the Secret of the bucket's
    credentials (outputs.secret), GPUs, a published image,
    and a Kubernetes version that has every field of the render (kube_version).
    Each problem is one line saying what to install or set. Exit 0: all there; 2: something is
    missing or the variables are invalid; 3: the cluster cannot be asked (the offline checks ran:
    the values, their rules and the image)."""
    from .engines import engine_of, options
    from .errors import Unreachable
    from .images import unpublished
    from .values import defaults, load_values

    values = load_values(variables_files(file, extra_files), sets, target, set_jsons=set_jsons, set_strings=set_strings)
    if namespace:  # the namespace the job would go to, as run.sh --namespace applies it there
        values["namespace"] = namespace
    offline = ["values", "rules"]  # load_values checked the schema and the rules: no cluster needed
    try:
        engine = engine_of(values)
        passed, failed, warned, where = engine.check(values, options(engine, kubeconfig=kubeconfig, context=context))
        unreachable = ""
    except Unreachable as error:
        passed, failed, warned, where = list(offline), [], getattr(error, "warned", []), ""
        unreachable = str(error)
    image = unpublished(values, defaults()["image"]["repository"])
    passed, failed = (passed, failed + [image]) if image else (passed + ["image"], failed)
    if unreachable:
        click.echo(f"error: {unreachable}; the cluster's checks were skipped, the offline ones ran", err=True)
    for line in warned:
        click.echo(f"warning: {line}", err=True)
    for line in failed:
        click.echo(f"error: {line}", err=True)
    if unreachable:
        click.echo(f"{values['target']} {values['name']}: offline checks {'failed' if failed else 'passed'} "
                   f"({', '.join(offline + ['image'])}); no cluster was asked")
        sys.exit(EXIT_UNREACHABLE)
    if failed:
        sys.exit(EXIT_MISSING)
    click.echo(f"{values['target']} {values['name']} in {where}: ready ({', '.join(passed)} checked)")
