"""The Jinja environment of one engine's templates, built once per engine."""

from __future__ import annotations

from pathlib import Path

import jinja2


def environment(templates: Path, filters: dict, **options) -> jinja2.Environment:
    """Templates from the folder `templates`: a missing variable is an error, nothing is escaped, and
    the text ends as the template does."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=True, **options)
    env.filters.update(filters)
    return env
