"""Hub repository ids: checked before anything is built, and filled in from a run's template."""

from __future__ import annotations

from focusflow.errors import InputError


def check_repo_id(repo_id: str) -> str:
    """``user/name`` (or ``name``, under the token's user) as the Hub accepts it, else one clear error."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    text = (repo_id or "").strip()
    try:
        validate_repo_id(text)
    except HFValidationError as exc:
        first = str(exc).splitlines()[0]
        raise InputError(f"--repo-id {repo_id!r} is not a Hub repository id such as user/name ({first})") from None
    return text


def fill_repo_id(template: str, language: str, model: str) -> str:
    """A run configuration's ``publish.repo_id`` with ``{language}`` and ``{model}`` filled in (``+`` → ``-``)."""
    return check_repo_id(template.replace("{language}", language).replace("{model}", model.replace("+", "-")))
