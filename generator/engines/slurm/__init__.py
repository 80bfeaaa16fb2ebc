"""The SLURM renderer: an sbatch script (templates/slurm.sbatch.j2) and the rules of its values."""

from .checks import slurm_errors as errors
from .render import files, render_sbatch as render_text, stream

__all__ = ["errors", "files", "render_text", "stream"]
