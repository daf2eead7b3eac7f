"""What a stage's build said about its artifact (the manifest's ``metadata``), read as a typed record.

Each stage that other code reads declares its record beside its build (a subclass naming its ``stages``), and
readers validate that record instead of picking keys out of a dict: a field is spelled once, with its type and
its default. A manifest written before a field existed reads with the field's default, and fields a record does
not declare are kept (``extra="allow"``), so an older or newer store still reads. Only this module reads an
artifact's metadata; ``tests/test_architecture.py`` keeps it so.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from focusflow.storage.artifact import Artifact
from focusflow.storage.errors import CorruptArtifactError, StoreError


class StageRecord(BaseModel):
    """The facts every build records (where and how long it ran, its language and lineage), and the way a record
    is read. The base class itself reads any stage's record, for views that show a record whole."""

    model_config = ConfigDict(extra="allow", frozen=True, protected_namespaces=())

    stages: ClassVar[tuple[str, ...]] = ()  # the stages whose artifacts carry this record (empty: any stage)

    host: str | None = None
    build_seconds: float | None = None
    language: str | None = None
    lineage: dict[str, str] = Field(default_factory=dict)  # role -> artifact URI, for artifacts recorded as URIs
    _stored: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, artifact: Artifact) -> Self:
        """The record of ``artifact``; an artifact of another stage, or a record that does not validate, is refused."""
        if cls.stages and artifact.stage not in cls.stages:
            raise StoreError(f"{artifact.uri} is a {artifact.stage!r} artifact; {cls.__name__} is the record of "
                             f"{', '.join(repr(s) for s in cls.stages)} artifacts")
        try:
            record = cls.model_validate(artifact.metadata)
        except ValidationError as exc:
            raise CorruptArtifactError(f"{artifact.uri}: its manifest's metadata is not a {cls.__name__}: "
                                       f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
        record._stored = artifact.metadata
        return record

    @classmethod
    def of_optional(cls, artifact: Artifact | None) -> Self | None:
        return None if artifact is None else cls.of(artifact)

    def shown(self) -> dict[str, Any]:
        """Every field the build recorded, undeclared ones included, exactly as stored: for views that show it
        whole (a report's stage sections, the stage commands' JSON output, the UI)."""
        return copy.deepcopy(self._stored) if self._stored else self.model_dump(exclude_unset=True)

    def scalars(self) -> dict[str, Any]:
        """The recorded numbers, strings and flags (not the host): the record's measurements in a table row."""
        return {k: v for k, v in self.shown().items() if isinstance(v, (int, float, str, bool)) and k != "host"}
