"""Storage of the stage cache: entries are read only if this user's secret key signed them.

Why a planted entry cannot run code.  Prefect keeps a stage's output as one file per cache key, a JSON
record whose metadata names the serializer of its payload, usually pickle; a planted record can name
pickle whatever serializer a task configures, and a file that is not such a record is unpickled too.
Prefect deserializes the file both to see whether the entry exists and to read it
(``ResultStore._exists`` and ``_read``), and both get its bytes from one place only: the result
storage's ``read_path``.  :class:`SignedStore` is that storage.  It writes ``MAGIC + tag + record``,
``tag`` being HMAC-SHA256, under the user's secret key, of the entry's name and the record; its
``read_path`` returns the record only when the tag verifies, and raises otherwise.  Prefect's
``_exists`` takes that for "no entry": the stage recomputes and its entry replaces the bad one.  So no
byte of a file that this user's key did not sign reaches a deserializer, and the bytes checked are the
bytes returned (no second read to swap a file in between).  Forging a tag takes the key; the name in
the tag keeps a genuine entry from serving another key.

The key is 32 random bytes in ``$XDG_CONFIG_HOME/pll/cache.key`` (``~/.config/pll/cache.key``),
created with mode 0600.  A key that others can read or replace, or that lies in a directory others can
write or another user owns, is refused, and so is such a cache directory: one warning names it and the
fix, and the stages run uncached (nothing is read or written there).  Entries are written to a private
temporary file and renamed into place, so that a reader never sees half an entry and a symlink planted
at an entry's name is replaced, not written through.

Prefect's ``Task`` takes as result storage only a block saved on its server, so that any process can
load it from there.  This one is built by importing :mod:`pll_pipeline.cache.policy` instead and carries a fixed
id, :data:`STORE_ID`, that no server knows: reading a result back from a state fetched from the API
(``ResultStore._from_metadata``) then fails to load the block, rather than falling back to a plain
local file system that would deserialize an unsigned file.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import secrets
import stat
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from prefect.filesystems import LocalFileSystem

from pll.utils.atomic_files import PRIVATE, write_atomically

MAGIC = b"pll-cache-1\n"
KEY_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size
STORE_ID = uuid.uuid5(uuid.NAMESPACE_URL, "pll:stage-cache")
GROUP_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
GROUP_OTHERS_ANY = 0o077

log = logging.getLogger(__name__)
_warned: set[str] = set()


class Refused(Exception):
    """A cache directory or key that is not this user's alone: the stages run uncached."""


def key_path() -> Path:
    """Where the user's cache key lives: ``$XDG_CONFIG_HOME/pll/cache.key``, by default under ``~/.config``."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "pll" / "cache.key"


def check_private(path: Path, forbidden: int, what: str, fix: str) -> None:
    """Raise :class:`Refused` if another user owns ``path`` or its mode has a bit of ``forbidden``."""
    st = path.stat()
    if st.st_uid != os.geteuid():
        raise Refused(f"{what} {path} belongs to another user (uid {st.st_uid}); {fix}")
    if st.st_mode & forbidden:
        raise Refused(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):o}, open to group or others; {fix}")


def secret_key() -> bytes:
    """The user's cache key, created on first use; :class:`Refused` if it or its directory is not private."""
    path = key_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private(path.parent, GROUP_OTHERS_WRITE, "cache key directory", f"run `chmod go-w {path.parent}`")
    if not path.exists():
        try:  # never over a key another process made meanwhile
            write_atomically({path: lambda tmp: tmp.write_bytes(secrets.token_bytes(KEY_BYTES))},
                             mode=PRIVATE, replace=False)
        except FileExistsError:
            pass
    fix = f"delete {path} (a new key is made; existing entries are then recomputed)"
    check_private(path, GROUP_OTHERS_ANY, "cache key", fix)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise Refused(f"cache key {path} is not {KEY_BYTES} bytes; {fix}")
    return key


def _write_parts(path, *parts) -> None:
    with open(path, "wb") as f:
        for part in parts:  # not joined: an entry may be hundreds of MB
            f.write(part)


def warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


class SignedStore(LocalFileSystem):
    """A local folder of cache entries, each signed with the user's key; see the module docstring.

    ``basepath`` may be relative: it is resolved against the working directory at each read and write.
    """

    _block_type_name = "pll signed stage cache"

    def model_post_init(self, context) -> None:
        super().model_post_init(context)
        self._block_document_id = STORE_ID

    def _entry(self, path: str) -> tuple[Path, Path]:
        """The cache directory and the file of entry ``path``: a name inside it, whose symlinks are not followed."""
        base = self._resolve_path("")
        file = Path(os.path.normpath(base / path))
        if base not in file.parents:
            raise ValueError(f"cache entry {path!r} is outside {base}")
        return base, file

    def _trusted(self, base: Path) -> bytes | None:
        """The key, or None (after one warning) if it or the cache directory ``base`` is not private."""
        try:
            fix = f"run `chmod go-w {base}`, or set PLL_CACHE_DIR to a directory of your own"
            check_private(base, GROUP_OTHERS_WRITE, "cache directory", fix)
            return secret_key()
        except (Refused, OSError, RuntimeError) as exc:  # RuntimeError: no home directory
            warn_once(f"stage cache not used, stages run uncached: {exc}")
            return None

    @staticmethod
    def _tag(key: bytes, base: Path, file: Path, record: bytes) -> bytes:
        mac = hmac.new(key, file.relative_to(base).as_posix().encode() + b"\0", hashlib.sha256)
        mac.update(record)
        return mac.digest()

    def read_path(self, path: str, _sync: bool | None = None) -> bytes:
        """The record stored under ``path``; ValueError if there is none or its tag does not verify.

        (Prefect passes ``_sync=True``.)
        """
        base, file = self._entry(path)
        if not file.is_file():
            raise ValueError(f"no cache entry {file}")
        key = self._trusted(base)
        if key is None:
            raise ValueError(f"cache entry {file} not read: the cache is not private")
        with open(os.open(file, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            magic, tag, record = f.read(len(MAGIC)), f.read(TAG_BYTES), f.read()
        if magic != MAGIC or not hmac.compare_digest(tag, self._tag(key, base, file, record)):
            raise ValueError(f"cache entry {file} is not signed with this user's key")
        with suppress(OSError):  # an entry's time is its last use: pruning drops the least recently used
            os.utime(file)
        return record

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:
        """Store ``content`` under ``path``, signed; nothing if the cache is not private or cannot be written.

        A write that fails (no space, no permission, a read-only folder) leaves
        no file behind and costs one warning per process, not the stage: the
        entry is simply missing, and a later run recomputes it.
        """
        base, file = self._entry(path)
        try:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            warn_once(f"stage cache: entries not written to {base} ({exc.strerror}); stages run on uncached")
            return str(file)
        key = self._trusted(base)
        if key is None:
            return str(file)
        try:
            file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomically({file: lambda tmp: _write_parts(tmp, MAGIC + self._tag(key, base, file, content), content)},
                             mode=PRIVATE)
        except OSError as exc:
            warn_once(f"stage cache: entries not written to {base} ({exc.strerror}); stages run on uncached")
        return str(file)

    async def aread_path(self, path: str) -> bytes:
        return await asyncio.to_thread(self.read_path, path)

    async def awrite_path(self, path: str, content: bytes) -> str:
        return await asyncio.to_thread(self.write_path, path, content)


@dataclass(frozen=True)
class Entry:
    """A cache entry on disk: its file, size in bytes, and last use (written or read) as a Unix time."""

    path: Path
    size: int
    used: float


def entries(folder: Path) -> list[Entry]:
    """The cache entries in ``folder``, least recently used first: only files that begin as an entry does, so a
    folder named by mistake loses nothing else to :func:`prune`."""
    found = []
    for path in Path(folder).rglob("*") if Path(folder).is_dir() else ():
        with suppress(OSError):  # gone meanwhile (another prune, a rewrite)
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as f:
                    if f.read(len(MAGIC)) != MAGIC:
                        continue
                st = path.stat()
                found.append(Entry(path, st.st_size, st.st_mtime))
    return sorted(found, key=lambda e: e.used)


def prune(folder: Path, *, older_than_days: float | None = None, max_bytes: int | None = None) -> list[Entry]:
    """Delete the entries unused for ``older_than_days``, then the least recently used until the rest fit in
    ``max_bytes``; return those deleted.  A run reading an entry deleted under it recomputes its stage."""
    kept = entries(folder)
    doomed = []
    if older_than_days is not None:
        cutoff = time.time() - older_than_days * 86400
        doomed = [e for e in kept if e.used < cutoff]
        kept = [e for e in kept if e.used >= cutoff]
    if max_bytes is not None:
        total = sum(e.size for e in kept)
        while kept and total > max_bytes:
            total -= kept[0].size
            doomed.append(kept.pop(0))
    for e in doomed:
        with suppress(FileNotFoundError):
            e.path.unlink()
    return doomed
