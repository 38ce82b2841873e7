"""Where the repository's files are, for tests at any depth of ``tests/``: import these rather
than counting ``Path(__file__).parents``, so that moving a test module does not break it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
CAPTURES = FIXTURES / "captures"
GOLDEN = ROOT / "tests" / "golden"
