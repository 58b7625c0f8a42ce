"""The metrics of a report, as the C++ report model has them (report/metric.h): their kinds (str,
Count, Duration in microseconds, Percent, Ratio), their JSON, their text in a table, and calls
aggregated by name and shapes. The Report (kprof.report) and its renderings build on these."""

import json
import math

NAME, HASH, DURATION, PERCENT = "Name", "Hash", "Duration (us)", "Percent"
DEVICE, COUNT, SHAPES = "Device", "Count", "Argument Shapes"


class Count(int):
    """A count: an integer that sums."""


class Duration(float):
    """A duration in microseconds."""


class Percent(float):
    """A percentage."""


class Ratio(float):
    """A ratio: averaged, not summed."""


_KINDS = {"string": str, "count": Count, "microseconds": Duration, "percent": Percent,
          "ratio": Ratio}
_KIND_OF = {str: "string", Count: "count", Duration: "microseconds", Percent: "percent",
            Ratio: "ratio"}
_KIND_ORDER = ["string", "count", "microseconds", "percent", "ratio"]


def kind_of(value):
    """The standard JSON's name of a value's kind: "string", "count", "microseconds"..."""
    try:
        return _KIND_OF[type(value)]
    except KeyError:
        raise TypeError(f"{value!r} is not a metric value (str, Count, Duration, Percent, "
                        "Ratio)") from None


def _metric_from_json(where, item):
    if not isinstance(item, dict) or len(item) != 1:
        raise ValueError(f"{where}: a metric is an object with one kind, e.g. "
                         '{"microseconds": 12.5}')
    (key, value), = item.items()
    if key not in _KINDS:
        raise ValueError(f'{where}: unknown metric kind "{key}" (accepted: '
                         f'{", ".join(_KIND_ORDER)})')
    if key == "string":
        if not isinstance(value, str):
            raise ValueError(f"{where}: a string metric holds {type(value).__name__}")
        return value
    if key == "count":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: a count is an integer")
        return Count(value)
    if value is None:
        value = math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: a {key} metric is a number")
    return _KINDS[key](value)


def _map_from_json(where, obj):
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object")
    return {name: _metric_from_json(f"{where}.{json.dumps(name)}" if where else json.dumps(name),
                                    item) for name, item in obj.items()}


def _number_json(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _sorted_by_bytes(value):
    """`value` with every object's keys in the order of their UTF-8 bytes, as nlohmann's."""
    if isinstance(value, dict):
        return {k: _sorted_by_bytes(value[k]) for k in sorted(value, key=str.encode)}
    if isinstance(value, list):
        return [_sorted_by_bytes(v) for v in value]
    return value


def _metric_to_json(value):
    kind = kind_of(value)
    if kind == "string":
        return {kind: str(value)}
    if kind == "count":
        return {kind: int(value)}
    return {kind: _number_json(float(value))}


def shortest_decimal(value):
    """The shortest text that reads back as `value`, fixed or scientific, whichever is shorter
    (fixed on a tie): C++'s std::to_chars."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    sign = "-" if text.startswith("-") else ""
    text = text.lstrip("-")
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    power = int(exponent or 0) - len(fraction)  # value = int(whole + fraction) * 10^power
    if not digits:
        return sign + "0"
    stripped = digits.rstrip("0")
    power += len(digits) - len(stripped)
    digits = stripped
    if power >= 0:
        fixed = digits + "0" * power
    elif len(digits) > -power:
        fixed = digits[:power] + "." + digits[power:]
    else:
        fixed = "0." + "0" * (-power - len(digits)) + digits
    scientific_exponent = power + len(digits) - 1
    scientific = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    scientific += "e" + ("-" if scientific_exponent < 0 else "+") + \
        f"{abs(scientific_exponent):02d}"
    return sign + (fixed if len(fixed) <= len(scientific) else scientific)


def _group_thousands(number):
    begin = 1 if number.startswith("-") else 0
    end = number.find(".")
    if end < 0:
        end = len(number)
    i = end
    while i > begin + 3:
        number = number[:i - 3] + "," + number[i - 3:]
        i -= 3
    return number


def _non_finite(value):
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def format_for_table(value):
    """A value as the table shows it: counts and durations grouped by thousands, durations and
    percents with two decimals, ratios with two significant digits."""
    kind = kind_of(value)
    if kind == "string":
        return str(value)
    if kind == "count":
        return _group_thousands(str(int(value)))
    value = float(value)
    if not math.isfinite(value):
        return _non_finite(value)
    if kind == "microseconds":
        return _group_thousands("%.2f" % value)
    if kind == "percent":
        return "%.2f" % value
    return "%.2g" % value


def aggregate_metric(values):
    """Durations, counts and percents sum, ratios average, strings stay when all are equal;
    mixed kinds become ""."""
    kind = kind_of(values[0])
    if any(kind_of(v) != kind for v in values):
        return ""
    if kind == "microseconds":
        return Duration(sum(float(v) for v in values))
    if kind == "percent":
        return Percent(sum(float(v) for v in values))
    if kind == "ratio":
        return Ratio(sum(float(v) for v in values) / len(values))
    if kind == "count":
        total = sum(int(v) for v in values) & (2**64 - 1)
        return Count(total - 2**64 if total >= 2**63 else total)
    return values[0] if all(v == values[0] for v in values) else ""


def _key_component(call, metric):
    if metric not in call:
        return ("-",)
    value = call[metric]
    return (_KIND_ORDER.index(kind_of(value)), format_for_table(value))


def aggregate_calls(calls):
    """Merges calls sharing Hash (else Name), Argument Shapes and Device, in order of first
    appearance."""
    groups = {}
    for call in calls:
        key = (_key_component(call, HASH if HASH in call else NAME),
               _key_component(call, SHAPES), _key_component(call, DEVICE))
        groups.setdefault(key, []).append(call)
    rows = []
    for group in groups.values():
        by_metric = {}
        for call in group:
            for name, value in call.items():
                by_metric.setdefault(name, []).append(value)
        rows.append({name: aggregate_metric(values) for name, values in sorted(by_metric.items())})
    return rows


def _column_sums(rows):
    sums = {}
    for row in rows:
        for name, value in sorted(row.items()):
            kind = kind_of(value)
            if kind not in ("count", "microseconds", "percent"):
                continue
            if name not in sums:
                sums[name] = value
                continue
            if kind_of(sums[name]) != kind:
                continue
            sums[name] = aggregate_metric([sums[name], value])
    sums[NAME] = "Sum"
    return sums


def _sort_key(row):
    value = row.get(DURATION)
    if isinstance(value, Duration) and not math.isnan(value):
        return float(value)
    return -math.inf



def table_columns(rows):
    """The table's columns: Name, Duration (us), Percent, Device, Count, Argument Shapes, then the
    rows' other metrics by name (report::TableColumns)."""
    first = [NAME, DURATION, PERCENT, DEVICE, COUNT, SHAPES]
    return first + sorted({name for row in rows for name in row} - set(first))


def xml_escaped(text):
    """As the CLI's core::XmlEscaped: &, <, > and " escaped, control characters but \t \n \r
    left out."""
    text = "".join(c for c in text if c >= " " or c in "\t\n\r")
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))
