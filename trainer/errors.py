"""Errors the trainer reports as one clear line and a distinct exit code (no traceback)."""


class TrainerError(Exception):
    """Base class: `exit_code` is the process exit status."""

    exit_code = 1


class ConfigError(TrainerError):
    """Bad flags or environment (names the flag or variable)."""

    exit_code = 2


class DataError(TrainerError):
    """A dataset file is missing, truncated, corrupt or cannot be downloaded (names the file)."""

    exit_code = 3


class CoordinatorError(TrainerError):
    """The coordinator did not come up within the init timeout."""

    exit_code = 4


class DeviceCountError(TrainerError):
    """The global device count is not hosts x local devices, or an all-reduce gave a wrong sum."""

    exit_code = 5


class CheckpointError(TrainerError):
    """A checkpoint exists but does not belong to this configuration."""

    exit_code = 6
