"""Data-parallel MNIST trainer run in every pod or srun task: `python -m trainer {train,query,allreduce}`."""

__version__ = "0.1.0"
