"""Headless Chromium for the browser tests, driven by Playwright.

The Debian package ``chromium`` (``make browser-deps``) provides /usr/bin/chromium. When it
cannot be launched the tests skip, unless ``CI=true`` or ``REQUIRE_PERF=1`` is set: then it is
a failure, so CI cannot pass without having run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"


def _unavailable(why: str) -> NoReturn:
    if os.environ.get("CI", "").lower() in ("true", "1") or os.environ.get("REQUIRE_PERF") == "1":
        pytest.fail(f"headless Chromium is required here but unusable: {why}")
    pytest.skip(f"headless Chromium unusable: {why} (make browser-deps)")


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (playwright Browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc})")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is not installed")
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception as exc:  # playwright raises its own Error types; any failure means "cannot launch"
        playwright.stop()
        _unavailable(f"launching {CHROMIUM} failed: {str(exc).splitlines()[0]}")
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """test-artifacts/ at the repository root (gitignored): screenshots for humans."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
