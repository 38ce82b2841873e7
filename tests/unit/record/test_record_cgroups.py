"""cgroups without privileges: the synthesized CGROUP records and -G's path rules, on a directory
laid out like a cgroup2 hierarchy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profiler.errors import UsageError
from profiler.format import abi as R
from profiler.record.cgroups import cgroup_directory
from profiler.record.synth import cgroup2_root, cgroup_records


def hierarchy(tmp_path: Path) -> Path:
    root = tmp_path / "unified"
    for group in ("", "a", "a/b", "c"):
        (root / group).mkdir(parents=True, exist_ok=True)
        (root / group / "cgroup.procs").write_text("")
    return root


def test_existing_groups_are_synthesized_with_their_inode_as_id(tmp_path: Path) -> None:
    root = hierarchy(tmp_path)
    recs = list(cgroup_records(7, str(root)))
    assert [r.path for r in recs] == ["/", "/a", "/a/b", "/c"]
    assert all(r.type == R.PERF_RECORD_CGROUP for r in recs)
    assert [r.id for r in recs] == [os.stat(root / p.lstrip("/")).st_ino for p in ("/", "/a", "/a/b", "/c")]


def test_the_cgroup2_mount_is_read_from_mounts(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"
                      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n")
    assert cgroup2_root(str(mounts)) == "/sys/fs/cgroup/unified"
    mounts.write_text("proc /proc proc rw 0 0\n")
    assert cgroup2_root(str(mounts)) is None


def test_g_takes_a_directory_or_a_path_from_the_root_and_never_leaves_it(tmp_path: Path) -> None:
    root = hierarchy(tmp_path)
    assert cgroup_directory(str(root / "a" / "b"), str(root)) == str(root / "a" / "b")
    assert cgroup_directory("a/b", str(root)) == str(root / "a" / "b")
    assert cgroup_directory("/c", str(root)) == str(root / "c")
    for bad in ("missing", "../unified/a/../../..", "/../../etc"):
        with pytest.raises(UsageError, match="no such cgroup"):
            cgroup_directory(bad, str(root))

