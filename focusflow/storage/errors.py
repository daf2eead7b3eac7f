"""The store's errors: each is a ``FocusflowError``, so the CLI shows it as one ``error:`` line."""

from __future__ import annotations

from focusflow.errors import FocusflowError


class StoreError(FocusflowError, RuntimeError):
    """The store could not complete an operation (after retries, where retrying made sense)."""


class ArtifactNotFound(StoreError):
    """No committed artifact at that stage and key."""


class CorruptArtifactError(StoreError):
    """A committed artifact's file is missing or does not match its manifest hash."""
