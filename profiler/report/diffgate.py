"""``profiler diff --fail-on``: rules over a :class:`~profiler.report.diff.DiffData` that a CI
job turns into an exit code.

A rule is ``TARGET OP CHANGE UNIT``, several separated by commas::

    any>+2pp            any row's share grew by more than 2 percentage points
    sym:parse_*>+5%     a row whose symbol matches the glob grew by more than 5 % of its share
    dso:libc*>+1pp      a row whose DSO matches the glob (its short name)
    total>+3%           the total period grew by more than 3 %
    any<-2pp            any row's share shrank by more than 2 points

``pp`` is an absolute change of the row's share (its delta), ``%`` a change relative to the
baseline's share (a row absent from the baseline has grown by an infinite percentage) or, for
``total``, to the baseline's total period. The gate compares the baseline with the first new
side (``--order`` does not change that).

Noise: with several captures per side (``--repeats N``), each repeat's value of the rule's
quantity is computed and a rule is broken only when the change is beyond its threshold **and**
beyond ``k`` times the larger of the two sides' standard deviations over their repeats (sample
standard deviation; ``k`` is 3 by default). The change is that of the repeats' means. With one
capture per side there is no spread and the threshold alone decides.
"""

from __future__ import annotations

import fnmatch
import math
import re
import statistics

from profiler.dataclass import dataclass
from profiler.errors import UsageError
from profiler.report.diff import DiffData, DiffRow, Side

DEFAULT_K = 3.0
_RULE = re.compile(r"^\s*(any|total|sym:(?P<sym>[^<>]+)|dso:(?P<dso>[^<>]+))\s*(?P<op>[<>])\s*"
                   r"(?P<num>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*(?P<unit>pp|%)\s*$")


@dataclass(frozen=True)
class Rule:
    """One parsed rule; ``threshold`` signed, in the unit (points or percent)."""

    text: str
    target: str  # "any", "total", "sym", "dso"
    pattern: str  # the glob of sym: and dso:
    op: str  # ">" (grew by more than) or "<" (shrank by more than / changed below)
    threshold: float
    unit: str  # "pp" or "%"

    def exceeds(self, change: float) -> bool:
        return change > self.threshold if self.op == ">" else change < self.threshold


@dataclass(frozen=True)
class Breach:
    """A rule broken by one row (or by the total): what the report line says."""

    rule: Rule
    what: str  # the row's texts, or "total period"
    change: float
    noise: float  # k × the larger standard deviation (0 without repeats)

    def sentence(self) -> str:
        unit = self.rule.unit
        change = "+inf %" if math.isinf(self.change) else f"{self.change:+.2f}{'pp' if unit == 'pp' else ' %'}"
        noise = f", beyond the repeats' noise ({self.noise:.2f}{'pp' if unit == 'pp' else ' %'})" if self.noise else ""
        return f"rule '{self.rule.text}' broken by {self.what}: {change}{noise}."


def parse_rules(text: str) -> list[Rule]:
    """Comma-separated rules; a UsageError names the rule that does not parse."""
    rules = []
    for part in _split(text):
        m = _RULE.match(part)
        if m is None:
            raise UsageError(f"--fail-on: cannot read the rule {part.strip()!r} (write e.g. 'any>+2pp', "
                             f"'sym:parse_*>+5%', 'dso:libc*>+1pp' or 'total>+3%').")
        target = "sym" if m["sym"] else "dso" if m["dso"] else m.group(1)
        if target == "total" and m["unit"] == "pp":
            raise UsageError(f"--fail-on: {part.strip()!r}: the total's change is in percent ('total>+3%').")
        rules.append(Rule(part.strip(), target, (m["sym"] or m["dso"] or "").strip(), m["op"],
                          float(m["num"]), m["unit"]))
    if not rules:
        raise UsageError("--fail-on needs at least one rule, e.g. 'any>+2pp'.")
    return rules


def _split(text: str) -> list[str]:
    """Split on the commas between rules (a glob's ``{a,b}`` is not split)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}" and depth > 0
        if ch == "," and not depth:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def check(data: DiffData, rules: list[Rule], k: float = DEFAULT_K) -> list[Breach]:
    """Every row (or total) that breaks a rule, rule by rule, rows in the diff's order."""
    base, new = data.sides[0], data.sides[1]
    out: list[Breach] = []
    for rule in rules:
        if rule.target == "total":
            b = _total_breach(rule, base, new, k)
            if b is not None:
                out.append(b)
            continue
        for row in data.rows:
            if _matches(rule, data, row):
                b = _row_breach(rule, data, row, k)
                if b is not None:
                    out.append(b)
    return out


def _matches(rule: Rule, data: DiffData, row: DiffRow) -> bool:
    if rule.target == "any":
        return True
    key = "sym" if rule.target == "sym" else "dso"
    if key not in data.sort:
        raise UsageError(f"--fail-on {rule.text!r}: the diff is not sorted by {key} (add it to --sort).")
    text = row.key[data.sort.index(key)]
    if key == "sym":
        text = text[4:]  # "[.] name"
    return fnmatch.fnmatchcase(text, rule.pattern)


def _row_breach(rule: Rule, data: DiffData, row: DiffRow, k: float) -> Breach | None:
    base, new = data.sides[0], data.sides[1]
    b_shares, n_shares = _repeat_shares(base, row), _repeat_shares(new, row)
    b_mean, n_mean = statistics.fmean(b_shares), statistics.fmean(n_shares)
    if rule.unit == "pp":
        change, spread = n_mean - b_mean, max(_sd(b_shares), _sd(n_shares))
    elif b_mean > 0:
        change = (n_mean - b_mean) * 100.0 / b_mean
        spread = max(_sd(b_shares), _sd(n_shares)) * 100.0 / b_mean
    else:
        change = math.inf if n_mean > 0 else 0.0
        spread = 0.0
    return _breach(rule, _describe(data, row), change, k * spread)


def _total_breach(rule: Rule, base: Side, new: Side, k: float) -> Breach | None:
    b_tot = [float(t) for t in _repeat_totals(base)]
    n_tot = [float(t) for t in _repeat_totals(new)]
    b_mean = statistics.fmean(b_tot)
    if b_mean <= 0:
        return None
    change = (statistics.fmean(n_tot) - b_mean) * 100.0 / b_mean
    spread = max(_sd(b_tot), _sd(n_tot)) * 100.0 / b_mean
    return _breach(rule, "the total period", change, k * spread)


def _breach(rule: Rule, what: str, change: float, noise: float) -> Breach | None:
    if not rule.exceeds(change):
        return None
    if noise and not abs(change) > noise:
        return None
    return Breach(rule, what, change, noise)


def _repeat_shares(side: Side, row: DiffRow) -> list[float]:
    return side.repeat_shares(row.key) if side.repeat_periods else [side.share(row.key)]


def _repeat_totals(side: Side) -> tuple[int, ...]:
    return side.repeat_totals or (side.total,)


def _sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _describe(data: DiffData, row: DiffRow) -> str:
    return "  ".join(t for t in row.key if t)
