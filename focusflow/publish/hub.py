"""Push a repository folder to the Hugging Face Hub: the one place focusflow talks to it.

``huggingface_hub`` does the work (``create_repo(exist_ok=True)``, ``create_branch`` for a revision,
``hf_hub_download`` of an earlier push's record, ``list_repo_files`` and ``upload_folder``, which also removes the
files that push wrote and this one lacks); the token is
``HF_TOKEN`` or the user's login, the endpoint ``HF_ENDPOINT`` (read when the push runs). Every failure becomes one
:class:`PushError` line naming the repository and the reason.
"""

from __future__ import annotations

import glob
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from focusflow.errors import FocusflowError


class PushError(FocusflowError, RuntimeError):
    """The push to the Hub failed; the message names the repository and why."""


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    url: str
    commit: str | None
    commit_url: str | None
    revision: str | None
    removed: tuple[str, ...] = ()  # the earlier push's files the commit removed (stale_files)

    def to_dict(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "url": self.url, "commit": self.commit, "commit_url": self.commit_url,
                "revision": self.revision, "removed": list(self.removed)}


#: The Hub a push goes to unless ``HF_ENDPOINT`` names another.
DEFAULT_ENDPOINT = "https://huggingface.co"


def hub_endpoint() -> str:
    """The Hub a push goes to now: ``HF_ENDPOINT``, else huggingface_hub's (huggingface.co)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT or DEFAULT_ENDPOINT).rstrip("/")


def require_token() -> None:
    """Refuse a push without a token before anything is built: huggingface_hub would send the upload without one,
    and the Hub's 401 (after the whole run) would blame a token nobody gave."""
    from huggingface_hub import get_token

    if not (os.environ.get("HF_TOKEN") or get_token()):
        raise PushError("publishing pushes to the Hub, and no token is set: set HF_TOKEN to a token with write "
                        "access or run `hf auth login` (or publish.push: false / --out FOLDER to write the folder "
                        "only)")


def default_api() -> Any:
    """An ``HfApi`` on ``HF_ENDPOINT`` (default huggingface.co) with ``HF_TOKEN`` or the saved login."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_endpoint(), token=os.environ.get("HF_TOKEN") or None)


def _reason(exc: BaseException) -> str:
    """One line saying why, from huggingface_hub's and the HTTP client's exceptions."""
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set; unset it to push"
    if isinstance(exc, LocalTokenNotFoundError):
        return "no token: set HF_TOKEN or run `hf auth login`"
    if isinstance(exc, HfHubHTTPError):
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        if status == 401:
            return "the Hub refused the token (401 Unauthorized): set HF_TOKEN to a token with write access"
        if status == 403:
            return "the token may not write to this repository (403 Forbidden): check its permissions"
        server = getattr(exc, "server_message", None) or str(exc).splitlines()[0]
        return f"the Hub answered {status or 'an error'}: {server}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    kind = type(exc).__name__
    if any(word in kind for word in ("Connect", "Timeout", "RemoteProtocol", "ReadError", "Network")) or \
            isinstance(exc, (ConnectionError, TimeoutError)):
        return f"the connection to the Hub failed ({kind}: {text[:200]})"
    return f"{kind}: {text[:300]}"


def stale_files(written_before: list[str], remote: list[str], folder: Path) -> list[str]:
    """The files an earlier focusflow push wrote (its record's list) that the repository still holds (``remote``)
    and ``folder`` no longer has: what a push removes, so that a re-push of another model leaves no earlier shard,
    report or notice beside its own. A file focusflow did not write is never removed, nor ``.gitattributes`` or
    anything in a subfolder."""
    new = {item.name for item in folder.iterdir() if item.is_file()}
    return sorted(name for name in set(written_before) & set(remote)
                  if name not in new and "/" not in name and name != ".gitattributes")


def written_before(api: Any, repo_id: str, revision: str | None, record: str) -> list[str]:
    """The files the repository's last focusflow push wrote, from its ``record`` (``lineage.json``'s ``files``);
    none where the repository holds no such record (new, or never pushed to by focusflow)."""
    import tempfile

    from huggingface_hub.errors import RemoteEntryNotFoundError

    with tempfile.TemporaryDirectory(prefix="focusflow-push-") as tmp:
        try:
            path = api.hf_hub_download(repo_id, record, revision=revision, repo_type="model", local_dir=tmp)
        except RemoteEntryNotFoundError:  # the Hub's 404 for the file; a failed connection is the push's error
            return []
        try:
            files = json.loads(Path(path).read_text(encoding="utf-8")).get("files")
        except (ValueError, AttributeError):  # not a record of focusflow's: nothing is known to be focusflow's
            return []
    return [name for name in files if isinstance(name, str)] if isinstance(files, list) else []


def push_folder(folder: Path, repo_id: str, *, private: bool | None = None, revision: str | None = None,
                commit_message: str | None = None, api: Any = None, record: str | None = None) -> PushResult:
    """Create the repository if needed and upload ``folder`` (on ``revision`` when given), removing with the upload
    the files an earlier focusflow push wrote that it no longer has (``record``: the file of ``folder`` that lists
    them, read back from the repository; :func:`stale_files`). ``private`` None: a new repository is as the Hub's
    default makes it (public, unless its organization makes new repositories private)."""
    api = api if api is not None else default_api()
    endpoint = str(getattr(api, "endpoint", "") or "").rstrip("/")
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        if private:  # create_repo ignores the flag for a repository that exists: a public one would get the weights
            api.update_repo_settings(repo_id, private=True, repo_type="model")
        if revision:
            api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
        earlier = written_before(api, repo_id, revision, record) if record else []
        stale = stale_files(earlier, api.list_repo_files(repo_id, revision=revision, repo_type="model"),
                            Path(folder)) if earlier else []
        with warnings.catch_warnings():  # transfer_report.parquet is meant for a model repository
            warnings.filterwarnings("ignore", message=".*about to commit a data file.*")
            info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model", revision=revision,
                                     commit_message=commit_message or f"Upload {repo_id} with focusflow",
                                     delete_patterns=[glob.escape(name) for name in stale] or None)  # exact names
    except Exception as exc:  # noqa: BLE001 — every failure becomes one line naming the repository
        where = f" at {endpoint}" if endpoint else ""
        raise PushError(f"could not push {repo_id}{where}: {_reason(exc)}") from exc
    return PushResult(repo_id=repo_id, url=str(url), commit=getattr(info, "oid", None),
                      commit_url=getattr(info, "commit_url", None), revision=revision, removed=tuple(stale))
