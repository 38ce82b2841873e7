"""``--sort cgroup``: cgroup ids named in perf's words."""

from __future__ import annotations

from typing import Any, cast

from profiler.format import records as R
from profiler.report.profile import cgroup_name
from profiler.report.replay import ReplayState, on_cgroup


def test_the_report_names_cgroups_in_perf_s_words() -> None:
    state = ReplayState()
    on_cgroup(state, R.Cgroup(id=25, path="/web"))
    profile = cast(Any, type("P", (), {"cgroup_names": state.cgroups}))
    assert [cgroup_name(profile, i) for i in (25, 26, 0)] == ["/web", "unknown", "N/A"]
