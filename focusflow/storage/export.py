"""``--out``: focusflow's files in a user's folder, which never cost the user a file of their own.

Two kinds of ``--out`` share one rule. An export (:func:`export_files`) copies a stored artifact into a folder as one
atomic unit; an output folder (:class:`OutputFolder`, ``focusflow evaluate``'s results) is filled file by file over
a long run and written again when the run goes on. Either goes into a new folder, an empty one, or one that holds
focusflow's own earlier output and nothing else: its marker file records the sha256 of every file focusflow wrote
there, and only files whose bytes are still those may be replaced (an output folder also takes files of its own
format that focusflow wrote elsewhere: evaluate's run files copied in from other machines). Anything else is refused
before any work starts, with nothing touched: a folder holding other files or files edited since focusflow wrote
them, a marker of the older kind that lists names only (it cannot tell an edit from focusflow's bytes), a symlink,
a store's root, a folder inside a store or above one; an export also refuses the current directory or a folder above
it (it replaces its folder whole) and an output folder (what a long run filled is not replaced by a copy).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from focusflow.storage.atomic import FolderInUseError, atomic_folder, atomic_path, atomic_write, sha256_file

EXPORT_MARKER = ".focusflow-export.json"
FOREIGN_SHOWN = 3  # files a refusal names
MARKER_FORMAT = 2  # 1 (no "format"): names only; 2: name → sha256 of the bytes focusflow wrote


#: Whether a file (its name relative to the folder, its path) is one of an output folder's own format, written by
#: focusflow here or elsewhere, that it may take as it is and write again.
OwnFormat = Callable[[str, Path], bool]


def check_export_target(out: str | os.PathLike[str], stores: Iterable[Path] = ()) -> Path:
    """The absolute folder ``out`` names, or FolderInUseError saying why focusflow may not export there.

    ``stores`` are the local store roots in play: ``out`` may be neither one of them, nor inside, nor above one.
    """
    return _check_target(out, stores, None, None)


def _check_target(out: str | os.PathLike[str], stores: Iterable[Path], output: str | None,
                  own_format: OwnFormat | None) -> Path:
    """The rule of both kinds of ``--out``: an export (``output`` None) or the output folder ``output`` names."""
    target = Path(out).expanduser().absolute()
    resolved = target.resolve()
    here = Path.cwd().resolve()
    if output is None and (resolved == here or resolved in here.parents):
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
    blocked = next((parent for parent in target.parents if parent.exists() and not parent.is_dir()), None)
    if blocked is not None:
        raise FolderInUseError(f"--out {out} lies under {blocked}, which is a file, not a folder; give a folder "
                               "whose parents are folders")
    if _names_only_marker(target):
        raise FolderInUseError(f"--out {out} holds an export whose marker lists names only (an older focusflow): it "
                               "cannot tell your edits from its files, so it replaces none; export into a new or "
                               "empty folder once, and later exports may replace that one")
    filled_by = _marker(target).get("output")
    if output is None and filled_by:
        raise FolderInUseError(f"--out {out} holds what focusflow {filled_by} wrote there over its run; an export "
                               "replaces its folder whole: give a new or empty folder, nothing was changed")
    foreign = _foreign_files(target, own_format)
    if foreign:
        shown = ", ".join(foreign[:3]) + (" and more" if len(foreign) > 3 else "")
        if output is None:
            raise FolderInUseError(f"--out {out} already holds files that focusflow did not write or that changed "
                                   f"since its export ({shown}); give a new or empty folder, nothing was changed")
        raise FolderInUseError(f"--out {out} already holds files that focusflow did not write or that changed since "
                               f"it wrote them ({shown}); give a new or empty folder, or move those files away: "
                               "nothing was changed")
    return target


class OutputFolder:
    """A folder focusflow fills file by file over a long run and writes again when the run goes on (``focusflow
    evaluate``'s tables and run files), under the rule of every ``--out`` (the module's docstring).

    Made before any work starts, it refuses a folder it may not write at once; :meth:`write` puts each file in place
    whole and records its sha256 in the marker at once, so a stopped run's folder is its own output when the same
    command goes on, and a file edited since is the user's. One process writes a folder at a time.
    """

    def __init__(self, out: str | os.PathLike[str], output: str, *, own_format: OwnFormat | None = None,
                 stores: Iterable[Path] = ()) -> None:
        """``output`` names what fills it (``evaluate``: in the marker and the messages); ``own_format`` accepts the
        files of its own format that focusflow wrote elsewhere; ``stores`` as for :func:`check_export_target`."""
        self.output = output
        self.root = _check_target(out, stores, output, own_format)

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def write(self, name: str, data: str | bytes) -> Path:
        """Write the file ``name`` (relative, ``/``-separated) whole and record what focusflow wrote."""
        payload = data.encode("utf-8") if isinstance(data, str) else data
        path = self.root / name
        atomic_write(path, payload)
        marker = _marker(self.root)
        files = _marker_hashes(self.root) or {}
        files[name] = hashlib.sha256(payload).hexdigest()
        marker.update({"format": MARKER_FORMAT, "output": self.output, "files": dict(sorted(files.items()))})
        atomic_write(self.root / EXPORT_MARKER, json.dumps(marker, indent=2, ensure_ascii=False))
        return path


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


def _marker(folder: Path) -> dict[str, Any]:
    """The folder's marker ({} without a readable one)."""
    marker = folder / EXPORT_MARKER
    if not marker.is_file() or marker.is_symlink():
        return {}
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _marker_files(folder: Path) -> object:
    """The ``files`` entry of the folder's marker (None without a readable one)."""
    return _marker(folder).get("files")


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


def _foreign_files(folder: Path, own_format: OwnFormat | None = None) -> list[str]:
    """Files under ``folder`` focusflow may not replace: those its marker does not list, or lists with other bytes,
    and that are not of ``own_format`` (none for a new or empty folder). Without a marker of this kind and without
    ``own_format`` only the top level is listed: any entry is foreign, and a large folder is not walked."""
    if not folder.is_dir():
        return []
    written = _marker_hashes(folder)
    if written is None and own_format is None:
        return sorted(entry.name for entry in folder.iterdir() if entry.name != EXPORT_MARKER)
    foreign = []
    for path in _files_under(folder):
        name = path.relative_to(folder).as_posix()
        if name == EXPORT_MARKER:
            continue
        if path.is_symlink():
            foreign.append(name)
        elif written is not None and name in written and sha256_file(path) == written[name]:
            continue
        elif own_format is None or not own_format(name, path):
            foreign.append(name)
        if len(foreign) > FOREIGN_SHOWN:  # enough to refuse and to say why: a user's large folder is not walked whole
            break
    return foreign


def _files_under(folder: Path) -> Iterator[Path]:
    """Every file (and symlink) under ``folder`` in a stable order, one folder at a time: a caller may stop early."""
    for top, folders, files in os.walk(folder):
        folders.sort()
        links = [name for name in folders if os.path.islink(os.path.join(top, name))]
        folders[:] = [name for name in folders if name not in links]
        for name in sorted([*files, *links]):
            yield Path(top) / name


__all__ = ["EXPORT_MARKER", "FolderInUseError", "OutputFolder", "OwnFormat", "check_export_target", "export_files"]
