"""`python -m trainer {train,query,allreduce,evaluate,predict}` (argparse: nothing beyond the standard library before
a command runs, and jax only once the ClusterSpec and the CPU device count are known)."""

from __future__ import annotations

import argparse
import errno
import os
import sys

from trainer import config, faults, rejoin, supervisor, versions
from trainer.cluster import resolve_cluster
from trainer.errors import ConfigError, TrainerError, as_peer_lost, report, write_stdout
from trainer.exit_codes import INTERRUPTED
from trainer.integers import ascii_int
from trainer.extras import missing

DESCRIPTION = ("Train an MNIST classifier data-parallel on one or many processes and hosts (train), check that "
               "the processes of a cluster see each other's devices (query, allreduce), and score or use a "
               "trained model (evaluate, predict).")


def _cluster_args(p: argparse.ArgumentParser, train: bool) -> None:
    g = p.add_argument_group("cluster (default: from the environment, see trainer/cluster.py)")
    g.add_argument("--coordinator-address", help="HOST:PORT of process 0's coordinator")
    g.add_argument("--coordinator-port", type=ascii_int, help="port when the coordinator comes without one (SLURM)")
    g.add_argument("--num-processes", type=ascii_int)
    g.add_argument("--process-id", type=ascii_int)
    g.add_argument("--local-device-count", type=ascii_int, help="devices per process (CPU: forced devices)")
    if not train:  # train has them among its settings
        config.add_arguments(g, config.RUNTIME)


class _Parser(argparse.ArgumentParser):
    def _print_message(self, message, file=None):
        """argparse's, but help that standard output cannot take is an error, not silence."""
        if message and file is sys.stdout:
            write_stdout(message)
        else:
            super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    # the name it was started by: the jax-trainer command, or `python -m trainer` (argv[0] is __main__.py)
    prog = "jax-trainer" if os.path.basename(sys.argv[0]) == "jax-trainer" else "python -m trainer"
    # No abbreviations (--run-na for --run-name): a flag is read only as it is spelled, so jaxgen and
    # the scripts, which read the rendered --checkpoint-dir and --run-name, read what the trainer reads.
    parser = _Parser(prog=prog, description=DESCRIPTION, allow_abbrev=False,
                     epilog=f"`{prog} COMMAND --help` describes a command and its flags.")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="data-parallel MNIST training", allow_abbrev=False)
    config.add_arguments(t)
    faults.add_arguments(t)
    _cluster_args(t, train=True)
    for name, text in (("query", "print local and global devices"),
                       ("allreduce", "also check that a psum of ones equals the global device count")):
        _cluster_args(sub.add_parser(name, help=text, allow_abbrev=False), train=False)
    e = sub.add_parser("evaluate", help="re-score the MNIST test set with an exported model", allow_abbrev=False)
    _model_args(e)
    e.add_argument("--data-dir", metavar="DIR", help="a folder with the MNIST files, downloaded into it if missing; "
                                                     "only this folder is read, one that is not there is refused "
                                                     "(default: the data the model's run read if it is still here, "
                                                     "else $JAXT_CACHE/mnist, downloaded there if missing)")
    config.add_field_argument(e, *config.fields_named("download"))
    e.add_argument("--mirror", metavar="URL", help="where MNIST is downloaded from when no copy is here (default: "
                                                   f"the run's mirror, else {config.DEFAULT_MIRROR})")
    p = sub.add_parser("predict", help="classify images (an IDX image file, gzipped or not, or PNGs) with an "
                                       "exported model", allow_abbrev=False)
    _model_args(p)
    p.add_argument("images", nargs="+", metavar="IMAGES", type=_path,
                   help="IDX image files or PNGs (a light ground is inverted, another size scaled as MNIST's are)")
    return parser


def _path(text: str) -> str:
    """A path argument: '' would be the current folder, never what was meant (an unset variable)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return text


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", type=_path,
                   help="an exported model: <outputs>/model or its model.safetensors")
    config.add_field_argument(p, *config.fields_named("platform"))


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C before train catches it as a stop signal, or in another command
        print("interrupted", file=sys.stderr)
        return INTERRUPTED


def _path_too_long(error: Exception) -> ConfigError | None:
    """A path given by a flag that the filesystem refuses to even look up (a name over 255 bytes;
    Python's Path.exists() raises it, where a missing file would only be False), as a config error."""
    if not isinstance(error, OSError) or error.errno != errno.ENAMETOOLONG or error.filename is None:
        return None
    return ConfigError(f"{os.fsdecode(error.filename)[:200]}: {error.strerror}")


def _run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    spec = None
    try:
        if problem := missing("jax", "trainer", parser.prog):  # every command computes with jax or numpy
            raise ConfigError(problem)
        versions.check()  # the jax and jaxlib this image or venv has, before jax is imported
        if args.command == "evaluate":
            from trainer.inference import evaluate

            return evaluate(args.model, args.data_dir, args.download, args.mirror, args.platform)
        if args.command == "predict":
            from trainer.inference import predict

            return predict(args.model, args.images, args.platform)
    except TrainerError as e:  # one process, no rank to name
        return report(e, distributed=False)
    except OSError as e:
        if (too_long := _path_too_long(e)) is None:
            raise
        return report(too_long, distributed=False)
    try:
        config.check_runtime(args.init_timeout, args.heartbeat_timeout)  # before the cluster is waited for
        spec = resolve_cluster(
            os.environ,
            coordinator_address=args.coordinator_address,
            num_processes=args.num_processes,
            process_id=args.process_id,
            local_device_count=args.local_device_count,
            coordinator_port=args.coordinator_port,
        )
        rejoin.mark()  # a bad pod UID ends the process before anything starts
        if spec.distributed and not supervisor.supervised():  # JAX may abort on a coordination failure
            return supervisor.run(spec, lambda: _run(argv))  # the child runs the command itself
        if args.command == "train":
            from trainer.train import train

            return train(config.TrainConfig.from_args(args), spec, faults.Faults.from_args(args))
        from trainer.query import query

        return query(spec, args.platform, args.init_timeout, args.heartbeat_timeout, args.command == "allreduce")
    except TrainerError as e:
        return report(e, spec)
    except Exception as e:  # every collective, not only a step's: a peer died (or the coordinator did)
        if (too_long := _path_too_long(e)) is not None:
            return report(too_long, spec)
        lost = as_peer_lost(e) if spec is not None and spec.distributed else None
        if lost is None:
            raise
        return report(lost, spec)
