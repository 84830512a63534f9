"""What every hostile-input test checks, shared by the table-driven files (tests/test_hostile*.py).

``snapshot`` records every entry under a folder without following links, so a test can assert that inputs stayed
byte-identical and that nothing but the expected outputs appeared; ``MakesMarker`` is a pickle payload that proves
code ran (the folder ``MARKER`` appears) if anything unpickles it.
"""

from __future__ import annotations

import os
from pathlib import Path

_LARGE = 64 << 20  # bytes past which a file is compared by size, inode and mtime, not content
MARKER = "EXECUTED"  # what hostile code would create in the case's folder; no case may make it appear


class MakesMarker:
    """Unpickling runs ``os.mkdir(folder/EXECUTED)``: a payload that proves code ran if the folder appears."""

    def __init__(self, folder: Path) -> None:
        self.target = str(folder / MARKER)

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every entry under ``root``, links not followed: (kind, content) with a link's target path, a file's bytes."""
    entries = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if os.path.islink(path):
                entries[relative] = ("link", os.readlink(path))
            elif os.path.isfile(path) and os.path.getsize(path) > _LARGE:
                status = os.stat(path)  # a huge (sparse) input is not read into memory: any write changes these
                entries[relative] = ("file", f"{status.st_size} bytes, inode {status.st_ino}, {status.st_mtime_ns}")
            elif os.path.isfile(path):
                entries[relative] = ("file", Path(path).read_bytes())
            elif os.path.isdir(path):
                entries[relative] = ("dir", None)
            else:
                entries[relative] = ("special", None)
    return entries


def refusal_line(err: str) -> str:
    """The one stderr line of a refused command; fails when there is a traceback or more than one line."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def left_as_before(folder: Path, before: dict, creates: tuple[str, ...] = ()) -> None:
    """Every entry of ``before`` (a ``snapshot`` of ``folder``) is still there unchanged, nothing but ``creates``
    appeared (no partial output, no temp file), and no hostile code ran."""
    after = snapshot(folder)
    for path, entry in before.items():
        assert after.get(path) == entry, f"{path} changed"
    created = sorted(set(after) - set(before))
    assert created == sorted(creates), created
    assert not (folder / MARKER).exists(), "hostile code ran"
