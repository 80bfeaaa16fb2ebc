"""The training loop: data → strategy steps → logs, metrics, checkpoints, evaluation."""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from trainer import bucket, checkpoint, data, goodput, models, monitoring, ownership, results, trainjob_status
from trainer.cluster import ClusterSpec
from trainer.checkpoint_writer import CheckpointWriter
from trainer.config import PRECISIONS, TrainConfig, check_runtime, ephemeral_outputs, named
from trainer.errors import ConfigError
from trainer.faults import NO_FAULTS, Faults
from trainer.metrics import Logger, MetricsFile, Pace, progress
from trainer.outputs import (CHECKPOINTS, DECODED_DATA, METRICS, RESULT_PREFIX, XLA_CACHE, again, read_summary,
                             run_dir as outputs_dir, termination_message)
from trainer.preemption import StopRequest, exit_code_of
from trainer.termination import terminate_with
from trainer.watchdog import Watchdog


# XLA CPU threads a process may ask for: 100,000 spent minutes creating threads before the first step.
MAX_CPU_THREADS = 1024


def check_config(cfg: TrainConfig) -> None:
    model = models.get(cfg.model)
    split = cfg.model_settings()[model.model_axis]  # the sizes a model axis splits (trainer/models)
    rules = [
        (cfg.epochs >= 1, f"--epochs {cfg.epochs} must be >= 1"),
        (cfg.seed >= 0, f"--seed {cfg.seed} must be >= 0"),
        (cfg.train_examples >= 0, f"--train-examples {cfg.train_examples} must be >= 0 (0 = all)"),
        (cfg.run_name not in ("", ".", "..") and "/" not in cfg.run_name and "\0" not in cfg.run_name,
         f"--run-name {cfg.run_name!r} must name one directory (no '/', not '.' or '..')"),
        (cfg.log_every >= 1, f"--log-every {cfg.log_every} must be >= 1"),
        (cfg.batch_size >= 1, f"--batch-size {cfg.batch_size} must be >= 1"),
        (0 < cfg.learning_rate < math.inf, f"--learning-rate {cfg.learning_rate} must be a finite number > 0"),
        (0 <= cfg.momentum < 1, f"--momentum {cfg.momentum} must be in [0, 1)"),
        (cfg.checkpoint_every >= 0, f"--checkpoint-every {cfg.checkpoint_every} must be >= 0"),
        (cfg.hang_timeout >= 0, f"--hang-timeout {cfg.hang_timeout} must be >= 0 (0 = off)"),
        (0 <= cfg.metrics_port <= 65535, f"--metrics-port {cfg.metrics_port} must be a TCP port, or 0 = off"),
        (cfg.model_parallelism >= 1, f"--model-parallelism {cfg.model_parallelism} must be >= 1"),
        (cfg.steps_per_dispatch >= 1, f"--steps-per-dispatch {cfg.steps_per_dispatch} must be >= 1"),
        (0 <= cfg.cpu_threads <= MAX_CPU_THREADS,
         f"--cpu-threads {cfg.cpu_threads} must be from 0 to {MAX_CPU_THREADS} (0 = this process's share)"),
        (cfg.precision in PRECISIONS, f"--precision {cfg.precision} must be one of {', '.join(PRECISIONS)}"),
        (cfg.allreduce_dtype == "float32" or cfg.strategy == "pmap",
         f"--allreduce-dtype {cfg.allreduce_dtype} needs --strategy pmap"),
        (cfg.model_parallelism == 1 or cfg.strategy == "sharded", "--model-parallelism > 1 needs --strategy sharded"),
        (cfg.model_parallelism < 1 or all(size % cfg.model_parallelism == 0 for size in split),  # < 1: said above
         f"--model-parallelism {cfg.model_parallelism} must divide each of --{cfg.model}-{model.model_axis.replace('_', '-')} "
         f"({','.join(map(str, split))})"),
        (not cfg.outputs_uri or cfg.checkpoint_dir, "--outputs-uri needs --checkpoint-dir (where the outputs are "
                                                    "kept before they are uploaded)"),
    ]
    for ok, message in rules:
        if not ok:
            raise ConfigError(message)
    check_runtime(cfg.init_timeout, cfg.heartbeat_timeout)
    if cfg.outputs_uri:
        bucket.split(cfg.outputs_uri)
    _check_cache_path(cfg)


def _check_cache_path(cfg: TrainConfig) -> None:
    """XLA's compilation cache takes only a UTF-8 path (a byte that is not: a TypeError deep in jax)
    of a directory (a file or device there: jax warns on every program and keeps nothing)."""
    cache = compilation_cache_dir(cfg)
    if not cache:
        return
    given = ("--compilation-cache" if cfg.compilation_cache else
             "$JAX_COMPILATION_CACHE_DIR" if os.environ.get("JAX_COMPILATION_CACHE_DIR") else
             "--checkpoint-dir and --run-name")
    try:
        cache.encode("utf-8")
    except UnicodeEncodeError:
        problem = "is not a UTF-8 path"
    else:
        problem = "is not a directory" if os.path.exists(cache) and not os.path.isdir(cache) else None
    if problem:
        raise ConfigError(f"the compilation cache {ascii(cache)} {problem} (from {given}); name another, or "
                          "--compilation-cache '' turns it off")


def check_layout(cfg: TrainConfig, spec: ClusterSpec, local_devices: int, num_examples: int) -> None:
    global_devices = spec.num_processes * local_devices
    if cfg.batch_size % global_devices:
        raise ConfigError(
            f"--batch-size {cfg.batch_size} is not divisible by the global device count {global_devices} "
            f"({spec.num_processes} processes x {local_devices} devices)"
        )
    if local_devices % cfg.model_parallelism:
        raise ConfigError(
            f"--model-parallelism {cfg.model_parallelism} must divide the local device count {local_devices}"
        )
    if cfg.batch_size > num_examples:
        raise ConfigError(f"--batch-size {cfg.batch_size} exceeds the {num_examples} training examples")


def run_dir(cfg: TrainConfig):
    """The job's outputs directory (trainer/outputs.py), or None without --checkpoint-dir."""
    return outputs_dir(cfg.checkpoint_dir, cfg.run_name) if cfg.checkpoint_dir else None


def compilation_cache_dir(cfg: TrainConfig) -> str | None:
    """--compilation-cache, else $JAX_COMPILATION_CACHE_DIR (which jax reads itself), else a
    directory of the job's outputs, which survives restarts with the checkpoints."""
    if cfg.compilation_cache is not None:
        return cfg.compilation_cache or None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return os.environ["JAX_COMPILATION_CACHE_DIR"]
    return str(run_dir(cfg) / XLA_CACHE) if cfg.checkpoint_dir else None


def _bucket_uri(cfg: TrainConfig) -> str | None:
    """Where the job keeps a copy of its outputs in a bucket (--outputs-uri), or None."""
    return bucket.job_uri(cfg.outputs_uri, cfg.run_name) if cfg.outputs_uri else None


def _restore(cfg, spec, host_state, jax, log):
    """(start_step, host_state): process 0 reads its newest checkpoint and broadcasts it to all."""
    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(host_state)
    leaves = [np.asarray(leaf) for _, leaf in paths_leaves]
    found = None
    if spec.process_id == 0 and cfg.checkpoint_dir:
        template = [(jax.tree_util.keystr(path), leaf) for (path, _), leaf in zip(paths_leaves, leaves)]
        found = checkpoint.load_latest(run_dir(cfg) / CHECKPOINTS, cfg.fingerprint(), template,
                                       ownership.start_over(run_dir(cfg), _bucket_uri(cfg)) if cfg.outputs_uri else None)
    step = found[0] if found else 0
    if found:
        leaves = found[1]
    if spec.distributed:
        from jax.experimental import multihost_utils

        # The step first: a fresh run (step 0) starts everywhere from the same seeded state, so the
        # state itself is only sent when there is a checkpoint.
        step = int(multihost_utils.broadcast_one_to_all(np.int32(step)))
        if step:
            leaves = [np.asarray(x) for x in multihost_utils.broadcast_one_to_all(leaves)]
    if step:
        log(f"resuming from the checkpoint of step {step}")
    return step, jax.tree.unflatten(treedef, leaves)


def _save(strategy, state, step, jax, writer: CheckpointWriter):
    """The state on the host, handed to the writer (process 0) to be written in the background.
    The copy stays on the step path: it is collective for sharded arrays (every process calls it)
    and the next step overwrites the device state. On the CPU it is a view, which JAX keeps intact
    (it does not reuse a donated buffer that NumPy still references)."""
    started = writer.begin()  # at most one write in flight
    host_state = strategy.get_state(state)
    paths_leaves = jax.tree_util.tree_flatten_with_path(host_state)[0]
    writer.submit(step, [leaf for _, leaf in paths_leaves], [jax.tree_util.keystr(p) for p, _ in paths_leaves],
                  started)
    return host_state


def _chunk_end(cfg: TrainConfig, s: int, spe: int, epoch_start: int, chunk: int, stops: tuple[int, ...] = ()) -> int:
    """Where the chunk starting at batch `s` of an epoch ends: after `chunk` steps at most, and at
    the next log line, checkpoint, global step of `stops` (fault injection) or the end of the epoch
    (all need that step's results on the host)."""
    end = min(s + chunk, spe, (s // cfg.log_every + 1) * cfg.log_every)
    step = epoch_start + s
    if cfg.checkpoint_every:
        end = min(end, (step // cfg.checkpoint_every + 1) * cfg.checkpoint_every - epoch_start)
    for stop in stops:
        if step < stop:
            end = min(end, stop - epoch_start)
    return end


def _test_accuracy(jax, spec, params, dataset, cfg: TrainConfig) -> float:
    """Each process scores a strided share of the test set; the counts are summed over processes."""
    from trainer.strategies import count_correct

    images = dataset.test_images[spec.process_id::spec.num_processes]
    labels = dataset.test_labels[spec.process_id::spec.num_processes]
    correct = count_correct(params, images, labels, precision=cfg.precision, model=cfg.model)
    if spec.distributed:
        from jax.experimental import multihost_utils

        correct = int(np.sum(multihost_utils.process_allgather(np.array([correct], np.int32))))
    return correct / len(dataset.test_labels)


def _publish(cfg, spec, local_devices, metrics_path, final, step, params, outputs, store, log) -> None:
    """Process 0: the summary and the exported model in the outputs (and the bucket), the result in the
    log and in the termination message."""
    summary = results.summarize(cfg, spec, local_devices, results.Records(metrics_path), final, step)
    if outputs:
        results.write(outputs, params, cfg, summary)
        log("outputs: model, summary and metrics written in this process's scratch folder; `jaxgen run` keeps "
            "them in a run folder when the run ends" if ephemeral_outputs() else
            f"outputs: {outputs} (model {outputs / summary['model']}, summary, metrics)")
    if store:
        store.upload_results(outputs)
        log(f"outputs: {store.uri} (model {store.uri}/{summary['model']}, summary, metrics)")
    result = results.line(summary)
    log(f"{RESULT_PREFIX}{result}")
    terminate_with(termination_message(result, store.uri if store else outputs))


def _phases(m: dict) -> dict:
    """The seconds of each start-up phase of trainer/goodput.py (PHASES), from the times in `m`."""
    seconds = {
        "program_startup": m["imported"] - m["launched"],
        "data_loading": m["loaded"] - m["imported"],
        "accelerator_initialization": m["initialized"] - m["loaded"],
        "unproductive_checkpoint_restore_time": m["restored"] - m["prepared"],
        "training_prep": (m["prepared"] - m["initialized"]) + (m["started"] - m["restored"]),
    }
    return {name: round(max(seconds[name], 0.0), 3) for name in goodput.PHASES}


@dataclass(frozen=True)
class Job:
    """What the run is, fixed once it is set up: its settings and cluster, the data and strategy on
    the devices, where its outputs go."""

    cfg: TrainConfig
    spec: ClusterSpec
    jax: Any
    dataset: data.Dataset
    local_devices: int
    strategy: Any
    train_data: Any  # on the devices
    outputs: Path | None
    metrics_path: Path | None
    steps_per_epoch: int
    total: int  # steps of the whole run
    finished_before: bool = False  # process 0: the job had already finished; this attempt trains nothing

    @property
    def rank0(self) -> bool:
        return self.spec.process_id == 0


@dataclass(frozen=True)
class Services:
    """What the phases save with, report to and stop by: built once, before the first step."""

    log: Logger
    writer: CheckpointWriter
    stop: StopRequest
    metrics: MetricsFile
    followers: tuple  # each sees every record and completed step
    reporter: trainjob_status.Reporter | None
    watchdog: Watchdog
    pace: Pace
    bucket: bucket.Bucket | None  # process 0's copy of the outputs in a bucket (--outputs-uri)
    faults: Faults


@dataclass(frozen=True)
class TrainingState:
    """What one phase hands the next: a value, replaced (dataclasses.replace), never changed in place."""

    state: Any  # on the devices
    step: int  # the global steps done
    start_step: int  # where this attempt started
    saved_step: int  # the newest checkpoint's step
    result: dict  # the last epoch's record (an earlier attempt's when this one resumes at the end)


def train(cfg: TrainConfig, spec: ClusterSpec, faults: Faults = NO_FAULTS) -> int:
    """Train; when the run fails, the checkpoint write in flight is finished first: it holds a
    consistent state a restart resumes from. `faults`: the tests' fault injection."""
    log = Logger(spec.process_id)
    writer = CheckpointWriter(run_dir(cfg) / CHECKPOINTS if spec.process_id == 0 and cfg.checkpoint_dir else None,
                              cfg.fingerprint(), log, before_rename=faults.before_rename(log))
    try:
        job, services, training = _setup(cfg, spec, writer, log, faults)
        stopped = False
        for epoch in range(training.step // job.steps_per_epoch, cfg.epochs):
            training, stopped = _epoch(job, services, training, epoch)
            if stopped:
                break
        return _finish(job, services, training, stopped)
    except BaseException:
        writer.abandon()
        raise


def _setup(cfg: TrainConfig, spec: ClusterSpec, writer: CheckpointWriter, log: Logger, faults: Faults):
    """(job, services, training state): everything before the first step. The outputs claimed, the
    stop signals and the endpoints installed, the data loaded, JAX up, the state on the devices (a
    checkpoint's when there is one) and the start record written."""
    check_config(cfg)
    outputs = run_dir(cfg)
    rank0 = spec.process_id == 0
    store = _claim_outputs(cfg, outputs, writer, log) if rank0 and outputs else None
    stop = StopRequest(log)
    stop.install()
    log(f"cluster: {spec.describe()}")
    metrics_path = cfg.metrics_file or (outputs / METRICS if outputs else None)
    # Every process serves its own endpoint (each pod's declared port answers), from the start.
    exporter = monitoring.Exporter(metrics_path if rank0 else None, outputs / CHECKPOINTS if outputs else None)
    exporter.serve(cfg.metrics_port, log)
    # Process 0 also reports to Kubeflow Trainer's status server when the runtime provides one.
    reporter = trainjob_status.from_env(log) if rank0 else None
    followers = (exporter, *([reporter] if reporter else []))
    dataset, marks = _load(cfg, log, rank0)
    job, state, step = _start_job(cfg, spec, dataset, outputs, metrics_path, log, marks)
    metrics = writer.metrics = MetricsFile(metrics_path if rank0 else None,
                                           lambda record: [f.observe(record) for f in followers])
    services = Services(log, writer, stop, metrics, followers, reporter, Watchdog(cfg.hang_timeout, log),
                        Pace(job.total, cfg.batch_size), store, faults)
    training = TrainingState(state, step, step, step, _last_epoch(metrics_path if rank0 else None))
    marks["started"] = time.time()
    if rank0 and _finished_before(outputs, step, job.total):  # no attempt: nothing is trained, nothing recorded
        return replace(job, finished_before=True), services, training
    metrics.write({"event": "start", "step": step, "total_steps": job.total, "processes": spec.num_processes,
                   "local_devices": job.local_devices, "strategy": cfg.strategy, "batch_size": cfg.batch_size,
                   "precision": cfg.precision, "launched": round(marks["launched"], 3),
                   "phases": _phases(marks)})
    stop.training = True  # from here on a stop signal saves the state
    return job, services, training


def _claim_outputs(cfg: TrainConfig, outputs: Path, writer: CheckpointWriter, log: Logger) -> bucket.Bucket | None:
    """Process 0 writes the job's outputs: it claims them, and restores them from the job's bucket
    (--outputs-uri, returned) before anything reads them: its newest checkpoint and metrics come first."""
    checkpoint.check_writable(cfg.checkpoint_dir)
    ownership.claim(outputs, cfg.run_name, cfg.fingerprint(), _bucket_uri(cfg))
    store = bucket.of(cfg.outputs_uri, cfg.run_name, cfg.outputs_endpoint)
    if store:
        store.check()
        store.restore(outputs, log)
        writer.bucket = store
    return store


def _last_epoch(metrics_path: Path | None) -> dict:
    """The last epoch's record of the metrics file (read a record at a time), or {}: an earlier
    attempt's figures when this one resumes at the end."""
    final = {}
    for record in results.Records(metrics_path):
        final = record if record.get("event") == "epoch" else final
    return final


def _start_job(cfg: TrainConfig, spec: ClusterSpec, dataset: data.Dataset, outputs, metrics_path, log, marks):
    """(job, state on the devices, its step): JAX up, the layout checked, the strategy made and the
    data and the state (the seeded one, or the newest checkpoint's) put on the devices."""
    from trainer import runtime

    jax = runtime.initialize(spec, cfg.platform, cfg.init_timeout, cfg.heartbeat_timeout, log, cfg.cpu_threads,
                             compilation_cache_dir(cfg))
    marks["initialized"] = time.time()
    local_devices = jax.local_device_count()
    check_layout(cfg, spec, local_devices, len(dataset.train_labels))
    log(f"{local_devices} local devices, {jax.device_count()} global devices, strategy {cfg.strategy}, "
        f"jax {jax.__version__}")
    spe = data.steps_per_epoch(len(dataset.train_labels), cfg.batch_size)
    total = cfg.epochs * spe
    strategy, state, step = _initial_state(cfg, spec, jax, local_devices, total, log, marks)
    train_data = strategy.put_data(dataset.train_images, dataset.train_labels)
    job = Job(cfg, spec, jax, dataset, local_devices, strategy, train_data, outputs, metrics_path, spe, total)
    return job, state, step


def _finished_before(outputs: Path | None, step: int, total: int) -> bool:
    """Whether the job had already finished: its checkpoint is of the last step and the summary of that
    step is in its outputs (a run that ended before it published is finished by this one)."""
    summary = read_summary(outputs) if outputs and step == total else None
    return bool(summary) and summary.get("steps") == total


def _already_finished(job: Job, step: int) -> str:
    """What a rerun of a finished job says: nothing trained, the results unchanged, how to train again."""
    cfg = job.cfg
    return (f"the job had already finished: its checkpoint is of step {step} of {job.total} "
            f"({cfg.epochs} epoch{'' if cfg.epochs == 1 else 's'}); nothing was trained and its results in {job.outputs} are unchanged. "
            + again(named("run_name"), named("epochs"), cfg.lr_schedule, step))


def _load(cfg: TrainConfig, log: Logger, rank0: bool):
    """(the data set, the start-up marks): MNIST read and decompressed (zlib and hashlib release the
    GIL) while jax is imported; a run that can restart keeps it decoded (process 0 writes it), where a
    restart maps it."""
    folder = os.environ.get(data.DECODED_DATA_ENV, str(run_dir(cfg) / DECODED_DATA) if cfg.checkpoint_dir else "")
    copies = data.DecodedCopies(Path(folder), write=rank0) if folder else None
    with ThreadPoolExecutor(1) as pool:
        loading = pool.submit(data.load_mnist, cfg.data_dir, cfg.download, cfg.mirror, log, copies)
        import jax  # noqa: F401  (the backend is created later, in runtime.initialize)

        from trainer import optimization, strategies  # noqa: F401
        marks = {"launched": goodput.launched(), "imported": time.time()}  # when each start-up phase ended
        dataset = loading.result()
        marks["loaded"] = time.time()
    if cfg.train_examples:
        dataset.train_images = dataset.train_images[: cfg.train_examples]
        dataset.train_labels = dataset.train_labels[: cfg.train_examples]
    return dataset, marks


def _initial_state(cfg: TrainConfig, spec: ClusterSpec, jax, local_devices: int, total: int, log, marks):
    """(strategy, state on the devices, its step): the seeded state, or the newest checkpoint's."""
    from trainer import optimization
    from trainer.strategies import make_strategy

    optimizer = optimization.make_optimizer(cfg.optimizer, cfg.learning_rate, cfg.momentum, total, cfg.lr_schedule)
    params = models.get(cfg.model).network().init_params(cfg.seed, cfg.model_settings())
    host_state = (params, optimization.init_opt_state(optimizer, params))
    marks["prepared"] = time.time()
    step, host_state = _restore(cfg, spec, host_state, jax, log)
    marks["restored"] = time.time()
    strategy = make_strategy(cfg.strategy, optimizer, local_devices, cfg.model_parallelism, cfg.allreduce_dtype,
                             cfg.precision, cfg.model, cfg.model_settings())
    return strategy, strategy.put_state(host_state), step


def _epoch(job: Job, services: Services, training: TrainingState, epoch: int) -> tuple[TrainingState, bool]:
    """One pass over the training set, from training.step on (mid-epoch after a resume), in chunks of
    steps; its record once it completes. (the training state after it, whether a stop signal ended it
    early)."""
    cfg, spec, spe, faults = job.cfg, job.spec, job.steps_per_epoch, services.faults
    perm = data.epoch_permutation(len(job.dataset.train_labels), cfg.seed, epoch)
    # Every chunk is waited for (its losses are read back): several local CPU devices deadlock the
    # all-reduce otherwise (jax 0.10), and a log line or checkpoint needs its step done anyway.
    chunk = min(cfg.steps_per_dispatch, cfg.log_every, spe)
    indices = np.zeros((chunk, cfg.batch_size // spec.num_processes), np.int32)
    losses, corrects = [], []
    s = training.step - epoch * spe
    bar = progress(spe - s, f"epoch {epoch + 1}/{cfg.epochs}", job.rank0)
    started = time.perf_counter()
    stopped = False
    while s < spe and not stopped:
        # An attempt's first chunk is its first step alone: when it is done is the restart's cost (the
        # step count is an argument of the chunk's program: nothing is compiled for it).
        first = training.step == training.start_step
        end = _chunk_end(cfg, s, spe, epoch * spe, chunk, (*faults.stops(), *([training.step + 1] if first else [])))
        for i in range(s, end):
            indices[i - s] = data.local_indices(perm, i, cfg.batch_size, spec.process_id, spec.num_processes)
        state, chunk_losses, chunk_corrects = job.strategy.run(training.state, job.train_data, indices, end - s)
        training = replace(training, state=state, step=training.step + end - s)
        losses.extend(chunk_losses.tolist())
        corrects.extend(chunk_corrects.tolist())
        s = end
        if first:
            _first_step(services, training.step)
        _stepped(services, training.step, bar, len(chunk_losses))
        if s % cfg.log_every == 0 or s == spe:
            if bar is None:
                services.log.progress(f"epoch {epoch + 1}/{cfg.epochs}, batch {s}/{spe}, loss={losses[-1]:.4f}, "
                                      f"{services.pace.describe()}")
            services.metrics.write({"event": "step", "epoch": epoch + 1, "step": training.step, "loss": losses[-1],
                                    **services.pace.record()})
        if cfg.checkpoint_every and training.step % cfg.checkpoint_every == 0 and training.step < job.total:
            _save(job.strategy, training.state, training.step, job.jax, services.writer)
            training = replace(training, saved_step=training.step)
            services.watchdog.beat(training.step)
        faults.after_step(training.step, services.writer, services.log, run_dir(cfg),
                          lambda: services.stop.signal_name is not None)
        stopped = training.step < job.total and services.stop.agreed(spec.distributed)
    if bar is not None:
        bar.close()
    if not stopped:
        training = replace(training, result=_epoch_record(job, services, training, epoch, losses, corrects,
                                                          time.perf_counter() - started))
    return training, stopped


def _first_step(services: Services, step: int) -> None:
    """This attempt's first step is done: its record, and how long after the process started."""
    seconds = time.time() - goodput.launched()
    services.metrics.write({"event": "first_step", "step": step, "seconds_since_launch": round(seconds, 3)})
    services.log.progress(f"first step (step {step}) {seconds:.1f} s after the process started")


def _stepped(services: Services, step: int, bar, steps: int) -> None:
    """A chunk is done: the watchdog, the writer's news, the pace and the followers learn of it."""
    services.watchdog.beat(step)
    services.writer.poll()  # a finished background write: its log line, or its error
    services.pace.stepped(step)
    for follower in services.followers:
        follower.stepped(step)
    if bar is not None:
        bar.update(steps)


def _epoch_record(job: Job, services: Services, training: TrainingState, epoch: int, losses: list, corrects: list,
                  seconds: float) -> dict:
    """A completed epoch's loss and accuracies, in the log and the metrics; returned (the result so far)."""
    cfg, log = job.cfg, services.log
    epoch_loss = float(np.mean(losses))
    train_acc = sum(corrects) / (len(corrects) * cfg.batch_size)
    params_host = job.strategy.get_state(training.state)[0]
    test_acc = _test_accuracy(job.jax, job.spec, params_host, job.dataset, cfg)
    services.watchdog.beat(training.step)
    log.progress(f"epoch {epoch + 1}/{cfg.epochs}, average epoch loss={epoch_loss:.4f}")
    log.progress(f"epoch {epoch + 1}/{cfg.epochs}, train accuracy={train_acc:.4f}, test accuracy={test_acc:.4f}, "
                 f"{seconds:.1f} s, {len(losses) * cfg.batch_size / seconds:.0f} examples/s")
    record = {"event": "epoch", "epoch": epoch + 1, "step": training.step, "loss": epoch_loss,
              "train_accuracy": train_acc, "test_accuracy": test_acc, "seconds": round(seconds, 3),
              "batches": len(losses), "examples_per_second": len(losses) * cfg.batch_size / seconds}
    services.metrics.write(record)
    return record


def _finish(job: Job, services: Services, training: TrainingState, stopped: bool) -> int:
    """After the last epoch or a stop: the last checkpoint on disk, the end record, the result
    (process 0) and the exit code."""
    log, step, writer = services.log, training.step, services.writer
    writer.wait()  # an earlier save's line before the stop's
    if stopped:
        signal_name = services.stop.signal_name
        cause = f"received {signal_name}" if signal_name else "a peer received a stop signal"
        log(f"preempted ({cause}): every process stops after step {step}")
    host_state = None
    if job.finished_before:  # process 0 alone: its peers score the restored model with it below
        log(_already_finished(job, step))
        earlier = results.line(read_summary(job.outputs))
        log(f"{RESULT_PREFIX}{earlier} (as before)")
        terminate_with(termination_message(earlier, services.bucket.uri if services.bucket else job.outputs))
    if training.saved_step != step:  # the same decision on every process (the save may be collective)
        host_state = _save(job.strategy, training.state, step, job.jax, writer)
    closing = time.perf_counter()
    writer.close()  # a stop signal's save and the final one are on disk before the process ends
    if not job.finished_before:
        services.metrics.write({"event": "preempted" if stopped else "end", "step": step,
                                "save_seconds": round(time.perf_counter() - closing, 6)})
    from trainer.runtime import CACHE_USE, describe_cache_use  # (runtime is imported once the job is set up)

    if CACHE_USE:
        log(f"compilation cache: {describe_cache_use()}")
    if services.reporter:
        services.reporter.close()
    if stopped:
        code = _stopped(job, services, step)
    else:
        code = 0
        _completed(job, services, training, host_state)
    if job.spec.distributed:
        job.jax.distributed.shutdown()
    return code


def _stopped(job: Job, services: Services, step: int) -> int:
    """A stop signal ended the run at `step`: its record uploaded, what a rerun does; the exit code."""
    store = services.bucket
    code, word = exit_code_of(services.stop.signal_name)
    if store:  # the stop's record too
        store.upload_metrics(job.outputs)
    after = ("nothing is saved without --checkpoint-dir, so a rerun starts over" if not job.cfg.checkpoint_dir else
             f"a rerun resumes here, from {store.uri}" if store else
             "its checkpoint is in this process's scratch folder, removed when the run ends, so a rerun starts "
             "over" if ephemeral_outputs() else
             "a rerun resumes here")
    services.log(f"stopped at step {step} of {job.total}; exiting with {code} ({word}: {after})")
    return code


def _completed(job: Job, services: Services, training: TrainingState, host_state) -> None:
    """The last step is done: the model scored when this attempt trained nothing, the result published."""
    params_host = (host_state or job.strategy.get_state(training.state))[0]  # collective: every process calls it
    final = training.result
    if training.step == training.start_step:  # resumed at the end: score the restored model (collective too)
        final = {**final, "test_accuracy": _test_accuracy(job.jax, job.spec, params_host, job.dataset, job.cfg)}
    if job.rank0 and not job.finished_before:
        _publish(job.cfg, job.spec, job.local_devices, job.metrics_path, final, training.step, params_host,
                 job.outputs, services.bucket, services.log)
    services.log("training completed.")  # every process: each one confirms its own end
