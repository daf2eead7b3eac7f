"""``--out``: copies of stored artifacts in a user's folder, which never cost the user a file of their own.

An export goes into a new folder, an empty one, or one that holds an earlier export and nothing else (its
marker file lists what focusflow wrote there). Anything else is refused before any work starts, with nothing
touched: a folder holding other files, the current directory or a folder above it, a store's root, a folder
inside a store or above one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from focusflow.storage.atomic import FolderInUseError, atomic_folder, atomic_path

EXPORT_MARKER = ".focusflow-export.json"


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
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise FolderInUseError(f"--out {out} exists and is not a folder; give a new or empty folder")
    foreign = _foreign_files(target)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise FolderInUseError(f"--out {out} already holds files that focusflow did not write ({shown}); give a new "
                               "or empty folder, nothing was changed")
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
        marker = {"artifact": artifact, "files": sorted(files)}
        with atomic_path(staging / EXPORT_MARKER) as temporary:
            temporary.write_text(json.dumps(marker, indent=2, ensure_ascii=False), encoding="utf-8")
        check_export_target(out, stores)  # again: a file of the user's may have appeared while we copied
    return target


def _foreign_files(folder: Path) -> list[str]:
    """Files under ``folder`` that no export marker there accounts for (none for a new or empty folder).

    Without a marker only the top level is listed: any entry is foreign, and a large folder is not walked."""
    if not folder.is_dir():
        return []
    marker = folder / EXPORT_MARKER
    written: set[str] | None = None
    if marker.is_file() and not marker.is_symlink():
        try:
            written = {str(name) for name in json.loads(marker.read_text(encoding="utf-8")).get("files", [])}
        except (ValueError, AttributeError, TypeError, UnicodeDecodeError):
            written = None
    if written is None:
        return sorted(entry.name for entry in folder.iterdir())
    present = (p for p in folder.rglob("*") if p.is_symlink() or not p.is_dir())
    return sorted(name for p in present if (name := p.relative_to(folder).as_posix()) not in written | {EXPORT_MARKER})


__all__ = ["EXPORT_MARKER", "FolderInUseError", "check_export_target", "export_files"]
