"""The ``focusflow`` command line: one entry point, one module per area under ``focusflow.cli``.

``cli.app`` holds the Typer ``app``; each area's module registers its commands on it when
imported, which is all this package does before handing over to ``main``.
"""

from __future__ import annotations

from focusflow.cli import config as _config  # noqa: F401
from focusflow.cli import corpus as _corpus  # noqa: F401
from focusflow.cli import evaluate as _evaluate  # noqa: F401
from focusflow.cli import flows as _flows  # noqa: F401
from focusflow.cli import lapt as _lapt  # noqa: F401
from focusflow.cli import models as _models  # noqa: F401
from focusflow.cli import ops as _ops  # noqa: F401
from focusflow.cli import publish as _publish  # noqa: F401

# Import order (sorted by module) is registration order, which is the order of `focusflow --help`.
from focusflow.cli import store as _store  # noqa: F401
from focusflow.cli import transfer as _transfer  # noqa: F401
from focusflow.cli.app import app
from focusflow.orchestration import results as _results  # noqa: F401 — the store's listings pass over Prefect's folder

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point (errors are reported by the one policy in ``cli.app``)."""
    app()
