"""jaxgen: validate a jax-training variables file and render its manifests (never imports jax)."""

from trainer import __version__  # one version for the package, the chart and the image tags

__all__ = ["__version__"]
