"""Files that appear whole or not at all: written beside their target, then renamed into place.

One writer serves every file the project leaves behind (scored tables, the
review queue, reports, audit tables, stage cache entries, the cache key and
new MLflow stores): a reader, or a run killed half-way, never sees half a file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

PUBLIC = 0o666
"""Mode of the files ``open`` makes (less the umask)."""

PRIVATE = 0o600
"""Mode of files only their owner may read: cache entries and the cache key."""


def write_atomically(writers: dict, *, mode: int = PUBLIC, replace: bool = True) -> None:
    """Run each ``{path: write(tmp_path)}`` on a temporary file in the target's (existing) folder, then rename.

    All temporary files are complete before the first one takes its target's
    name; on any error they are removed and no target is touched.

    Parameters
    ----------
    writers : dict
        ``{target path: callable}``; the callable writes the file whose path it is given.
    mode : int, default=PUBLIC
        Permissions of the temporary files, hence of the targets (less the umask).
    replace : bool, default=True
        False: a target that exists (or appears meanwhile) is left as it is and
        :class:`FileExistsError` raised, e.g. for a key that another process
        may create at the same moment.
    """
    staged = {}
    try:
        for path, write in writers.items():
            path = Path(path)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
            staged[path] = tmp
            write(tmp)
        for path, tmp in staged.items():
            if replace:
                os.replace(tmp, path)
            else:
                os.link(tmp, path)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
