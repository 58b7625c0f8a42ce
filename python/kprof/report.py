"""The report model and its renderings, as the C++ core has them (core/report*.cc).

A Report holds one metric map per call, the totals per device, and the configuration. Metric
values keep their kind: str, Count (int), Duration (microseconds), Percent and Ratio (float).
Report.from_json reads the standard JSON report (kprofd's or TVM's); as_json, as_table and
as_csv write what `kprof report` writes for the same report.
"""

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

class Report:
    """A profiling run's report: calls, device totals, configuration."""

    def __init__(self, calls=None, device_metrics=None, configuration=None):
        self.calls = list(calls or [])
        self.device_metrics = dict(device_metrics or {})
        self.configuration = dict(configuration or {})
        # A checked profile's verdicts (kprof.v1.CheckVerdict), passed, one per checked call.
        self.checks = []

    def __eq__(self, other):
        return (isinstance(other, Report) and self.calls == other.calls and
                self.device_metrics == other.device_metrics and
                self.configuration == other.configuration)

    def __repr__(self):
        return (f"Report({len(self.calls)} calls, devices {sorted(self.device_metrics)}, "
                f"{len(self.configuration)} configuration entries)")

    @staticmethod
    def from_json(text):
        """Parses the standard JSON report; ValueError naming the place when it is not one."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON: {error}") from None
        if not isinstance(doc, dict):
            raise ValueError("a report is a JSON object")
        calls = doc.get("calls", [])
        if not isinstance(calls, list):
            raise ValueError("calls: expected an array")
        devices = doc.get("device_metrics", {})
        if not isinstance(devices, dict):
            raise ValueError("device_metrics: expected an object")
        return Report(
            [_map_from_json(f"calls[{i}]", call) for i, call in enumerate(calls)],
            {name: _map_from_json(f"device_metrics.{json.dumps(name)}", m)
             for name, m in devices.items()},
            _map_from_json("configuration", doc.get("configuration", {})))

    @staticmethod
    def from_proto(message):
        """From a kprof.v1.Report message."""
        def convert(metric_map):
            out = {}
            for name, value in metric_map.metrics.items():
                which = value.WhichOneof("value")
                if which == "string":
                    out[name] = value.string
                elif which == "count":
                    out[name] = Count(value.count)
                elif which == "microseconds":
                    out[name] = Duration(value.microseconds)
                elif which == "percent":
                    out[name] = Percent(value.percent)
                elif which == "ratio":
                    out[name] = Ratio(value.ratio)
            return out
        return Report([convert(c) for c in message.calls],
                      {name: convert(m) for name, m in message.device_metrics.items()},
                      convert(message.configuration))

    def as_json(self, indent=None):
        """The standard JSON report."""
        def convert(metrics):
            return {name: _metric_to_json(value) for name, value in sorted(metrics.items())}
        return json.dumps({
            "calls": [convert(c) for c in self.calls],
            "configuration": convert(self.configuration),
            "device_metrics": {name: convert(m) for name, m in sorted(self.device_metrics.items())},
        }, indent=indent, ensure_ascii=False)

    def as_trace(self):
        """The Chrome trace event format `kprof report --format trace` writes (Perfetto and
        chrome://tracing open it): a track per device, a slice per call laid end to end in the
        calls' order (a report holds durations, not start times)."""
        def plain(value):
            kind = kind_of(value)
            if kind == "string":
                return str(value)
            if kind == "count":
                return int(value)
            return _number_json(float(value))

        def device_of(call):
            value = call.get(DEVICE)
            return str(value) if value is not None and kind_of(value) == "string" \
                else "unknown device"

        names = {device_of(c) for c in self.calls} | set(self.device_metrics)
        tracks = {device: k for k, device in enumerate(sorted(names, key=str.encode), 1)}
        events = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                   "args": {"name": "kprof profile"}}]
        for device, track in sorted(tracks.items(), key=lambda t: t[0].encode()):
            events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": track,
                           "args": {"name": device}})
        clock = {}
        for call in self.calls:
            device = device_of(call)
            value = call.get(DURATION)
            duration = 0.0
            if value is not None and kind_of(value) == "microseconds" and \
                    math.isfinite(float(value)) and float(value) > 0:
                duration = float(value)
            name = call.get(NAME)
            name = str(name) if name is not None and kind_of(name) == "string" else "call"
            at = clock.get(device, 0.0)
            events.append({"name": name, "cat": "call", "ph": "X", "pid": 1,
                           "tid": tracks[device], "ts": at, "dur": duration,
                           "args": {k: plain(v) for k, v in call.items()}})
            clock[device] = at + duration
        root = {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {
            "configuration": {k: plain(v) for k, v in self.configuration.items()},
            "device_totals": {d: {k: plain(v) for k, v in m.items()}
                              for d, m in self.device_metrics.items()},
            "layout": "a track per device; its calls laid end to end in their order (kprofd "
                      "measures durations, not start times)"}}
        return json.dumps(_sorted_by_bytes(root), ensure_ascii=False, separators=(",", ":"))

    def as_html(self):
        """The page `kprof report --format html` writes: each device's calls, aggregated, as
        bars, then a table of them that sorts, then the configuration."""
        from kprof.report_html import report_html
        return report_html(self)

    def as_table(self, sort=True, aggregate=True, col_sums=True):
        """The human table `kprof report` prints: a row per (aggregated) call, longest first, a
        Sum row, a Total row per device, then the configuration."""
        rows = aggregate_calls(self.calls) if aggregate else [dict(c) for c in self.calls]
        if sort:
            rows.sort(key=_sort_key, reverse=True)  # stable, as the C++ stable_sort
        if col_sums:
            sums = _column_sums(rows)
            rows.append({NAME: "----------"})
            rows.append(sums)
        for device, metrics in sorted(self.device_metrics.items()):
            total = dict(metrics)
            total[NAME] = "Total"
            rows.append(total)
        headers = table_columns(rows)
        cells = [headers] + [[format_for_table(row[h]) if h in row else "" for h in headers]
                             for row in rows]
        widths = [max(len(line[c]) for line in cells) for c in range(len(headers))]
        out = []
        for line in cells:
            text = "  ".join(cell.ljust(widths[c]) if c == 0 else cell.rjust(widths[c])
                             for c, cell in enumerate(line))
            out.append(text.rstrip(" ") + "\n")
        out.append("\nConfiguration\n-------------\n")
        for name, value in sorted(self.configuration.items()):
            out.append(f"{name}: {format_for_table(value)}\n")
        return "".join(out)

    def as_csv(self):
        """The calls as RFC 4180 CSV: strings always quoted, numbers in full precision."""
        named = {name for call in self.calls for name in call}  # in the table's order
        headers = [h for h in (NAME, DURATION, PERCENT, DEVICE, COUNT, SHAPES) if h in named]
        headers += sorted(named - set(headers))

        def header(name):
            if any(ch in name for ch in ',"\r\n'):
                return '"' + name.replace('"', '""') + '"'
            return name

        def cell(value):
            kind = kind_of(value)
            if kind == "string":
                return '"' + str(value).replace('"', '""') + '"'
            if kind == "count":
                return str(int(value))
            return shortest_decimal(value)

        lines = [",".join(header(h) for h in headers)]
        for call in self.calls:
            lines.append(",".join(cell(call[h]) if h in call else "" for h in headers))
        return "\n".join(lines) + "\n"
