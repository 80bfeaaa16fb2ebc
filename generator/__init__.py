"""jaxgen: validate a jax-training variables file and render its manifests (never imports jax)."""

__version__ = "0.1.0"
