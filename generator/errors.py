"""Errors jaxgen reports to the user: one line each, never a traceback."""

from trainer.errors import printable  # noqa: F401  (what a name is printed through; jaxgen's modules import it here)


class UserError(Exception):
    """Bad input (unreadable file, bad syntax, bad option); exit code 2."""


class Unreachable(UserError):
    """The engine cannot be asked: no kubectl or squeue, no context, the API server does not answer (exit 3)."""


class TemplateBug(RuntimeError):
    """A template produced text that does not parse: a bug of ours, never the user's input."""


class ValidationFailed(UserError):
    """The merged variables break the schema or a semantic rule; carries every problem found."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("\n".join(errors))


EXCERPT = 60  # characters of a user's value or key an error message quotes


def excerpt(text: str) -> str:
    """`text` cut to EXCERPT characters, saying how long it was: error lines stay short."""
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}… ({len(text)} characters)"
