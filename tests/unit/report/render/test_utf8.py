"""The one rule for names that are not UTF-8 (profiler/report/render/utf8.py), on values and on
JSON serialized either way: every byte surrogateescape kept becomes ``\\xNN``, valid pairs and
escaped backslashes are left alone, other lone surrogates become U+FFFD."""

from __future__ import annotations

import json

import pytest

from profiler.report.render.utf8 import json_text, text

BAD = b"w\xffk\xfe".decode("utf-8", "surrogateescape")
CASES = [
    (BAD, "w\\xffk\\xfe"),
    ("café ✓", "café ✓"),
    ("\U0001F600 and \U00010080", "\U0001F600 and \U00010080"),  # pairs when ensure_ascii escapes them
    ("a\\udcff", "a\\udcff"),  # a backslash and the letters u, d, c, f, f: text, not an escape
    ("\ud800x", "\ufffdx"),  # a lone high surrogate surrogateescape never makes
    ("", ""),
]


@pytest.mark.parametrize(("value", "shown"), CASES)
def test_values_follow_the_rule(value: str, shown: str) -> None:
    assert text(value) == shown
    text(value).encode("utf-8")  # strict


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize(("value", "shown"), CASES)
def test_serialized_json_follows_the_same_rule(value: str, shown: str, ensure_ascii: bool) -> None:
    out = json_text(json.dumps({"name": value, "list": [value, 1]}, ensure_ascii=ensure_ascii))
    out.encode("utf-8")  # valid UTF-8 whatever the input held
    assert json.loads(out) == {"name": shown, "list": [shown, 1]}


def test_plain_json_is_returned_as_it_is() -> None:
    doc = json.dumps({"a": ["x", 1.5, None]})
    assert json_text(doc) is doc
