"""``--out``: copies of stored artifacts in a user's folder, which never cost the user a file of their own.

An export goes into a new folder, an empty one, or one that holds an earlier export and nothing else: its marker
file records the sha256 of every file focusflow wrote there, and only files whose bytes are still those may be
replaced. Anything else is refused before any work starts, with nothing touched: a folder holding other files or
files edited since the export, a marker of the older kind that lists names only (it cannot tell an edit from
focusflow's bytes), a symlink, the current directory or a folder above it, a store's root, a folder inside a store
or above one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from focusflow.storage.atomic import FolderInUseError, atomic_folder, atomic_path, sha256_file

EXPORT_MARKER = ".focusflow-export.json"
MARKER_FORMAT = 2  # 1 (no "format"): names only; 2: name → sha256 of the bytes focusflow wrote


def check_export_target(out: str | os.PathLike[str], stores: Iterable[Path] = ()) -> Path:
    """The absolute folder ``out`` names, or FolderInUseError saying why focusflow may not write there.

    ``stores`` are the local store roots in play: ``out`` may be neither one of them, nor inside, nor above one.
    """
    target = Path(out).expanduser().absolute()
    resolved = target.resolve()
    here = Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise FolderInUseError(f"--out {out} is the current directory or a folder above it; give a new folder "
                               "for the export (e.g. --out ./export)")
    for store in stores:
        root = Path(store).resolve()
        if resolved == root or root in resolved.parents or resolved in root.parents:
            raise FolderInUseError(f"--out {out} is the artifact store {root}, inside it or above it; export to a "
                                   "folder outside the store")
    if target.is_symlink():
        raise FolderInUseError(f"--out {out} is a symlink (to {os.readlink(target)}); focusflow does not follow it "
                               "for an export: give the folder itself or a new one")
    if target.exists() and not target.is_dir():
        raise FolderInUseError(f"--out {out} exists and is not a folder; give a new or empty folder")
    if _names_only_marker(target):
        raise FolderInUseError(f"--out {out} holds an export whose marker lists names only (an older focusflow): it "
                               "cannot tell your edits from its files, so it replaces none; export into a new or "
                               "empty folder once, and later exports may replace that one")
    foreign = _foreign_files(target)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FolderInUseError(f"--out {out} already holds files that focusflow did not write or that changed "
                               f"since its export ({shown}); give a new or empty folder, nothing was changed")
    return target


def export_files(out: str | os.PathLike[str], files: Mapping[str, Path], *, artifact: str,
                 stores: Iterable[Path] = ()) -> Path:
    """Copy ``files`` (relative name → local file) into ``out`` as one atomic unit, with the marker that lets a
    later export of anything replace this one; refused (nothing touched) where :func:`check_export_target` says."""
    stores = list(stores)
    target = check_export_target(out, stores)
    with atomic_folder(target, replace=True) as staging:
        for name, source in files.items():
            copy = staging / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, copy)
        marker = {"format": MARKER_FORMAT, "artifact": artifact,
                  "files": {name: sha256_file(staging / name) for name in sorted(files)}}
        with atomic_path(staging / EXPORT_MARKER) as temporary:
            temporary.write_text(json.dumps(marker, indent=2, ensure_ascii=False), encoding="utf-8")
        check_export_target(out, stores)  # again: a file of the user's may have appeared while we copied
    return target


def _marker_files(folder: Path) -> object:
    """The ``files`` entry of the folder's marker (None without a readable one)."""
    marker = folder / EXPORT_MARKER
    if not marker.is_file() or marker.is_symlink():
        return None
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return recorded.get("files") if isinstance(recorded, dict) else None


def _marker_hashes(folder: Path) -> dict[str, str] | None:
    """What the folder's marker says focusflow wrote (relative name → sha256); None without a readable marker of
    this kind (none, a broken one, one that lists names only)."""
    files = _marker_files(folder)
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return {str(name): digest for name, digest in files.items()}


def _names_only_marker(folder: Path) -> bool:
    """Whether the folder holds an older export's marker: a list of names without their hashes."""
    return isinstance(_marker_files(folder), list)


def _foreign_files(folder: Path) -> list[str]:
    """Files under ``folder`` focusflow may not replace: those its marker does not list, or lists with other bytes
    (none for a new or empty folder). Without a marker of this kind only the top level is listed: any entry is
    foreign, and a large folder is not walked."""
    if not folder.is_dir():
        return []
    written = _marker_hashes(folder)
    if written is None:
        return sorted(entry.name for entry in folder.iterdir() if entry.name != EXPORT_MARKER)
    foreign = []
    for path in sorted(folder.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        name = path.relative_to(folder).as_posix()
        if name == EXPORT_MARKER:
            continue
        if path.is_symlink() or name not in written or sha256_file(path) != written[name]:
            foreign.append(name)
    return foreign


__all__ = ["EXPORT_MARKER", "FolderInUseError", "check_export_target", "export_files"]
