"""Stand-in flows with the signatures of the real ones, so deployment tests do not depend on the
pipeline's flows (or their run time). Flow names differ from the real flows' on purpose."""

from __future__ import annotations

from prefect import flow


@flow(name="stub-specialize-language")
def specialize_language(language: str, config: dict | None = None, config_path: str | None = None) -> str:
    return language


@flow(name="stub-evaluate-checkpoint")
def evaluate_checkpoint(checkpoint_uri: str, language: str, suites: list[str] | None = None) -> dict:
    return {"checkpoint_uri": checkpoint_uri, "language": language, "suites": suites or []}
