import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from pll.utils.atomic_files import PRIVATE, write_atomically


def test_a_failing_writer_leaves_nothing_and_touches_no_target(tmp_path):
    frame = pd.DataFrame({"a": [1, 2]})
    (tmp_path / "a.parquet").write_text("before")

    def broken(path):
        Path(path).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically({tmp_path / "a.parquet": lambda p: frame.to_parquet(p), tmp_path / "b.parquet": broken})
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]
    assert (tmp_path / "a.parquet").read_text() == "before"
    write_atomically({tmp_path / "a.parquet": lambda p: frame.to_parquet(p)})
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), frame)


def test_private_files_are_the_owners_alone_and_public_ones_follow_the_umask(tmp_path):
    write_atomically({tmp_path / "key": lambda p: Path(p).write_bytes(b"k")}, mode=PRIVATE)
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600
    umask = os.umask(0o022)
    try:
        write_atomically({tmp_path / "table": lambda p: Path(p).write_text("t")})
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "table").stat().st_mode) == 0o644


def test_without_replace_an_existing_target_is_kept(tmp_path):
    (tmp_path / "key").write_bytes(b"first")
    with pytest.raises(FileExistsError):
        write_atomically({tmp_path / "key": lambda p: Path(p).write_bytes(b"second")}, replace=False)
    assert (tmp_path / "key").read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["key"]
