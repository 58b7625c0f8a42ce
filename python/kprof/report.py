"""The report model and its renderings, as the C++ core has them (core/report*.cc).

A Report holds one metric map per call, the totals per device, and the configuration. Metric
values keep their kind: str, Count (int), Duration (microseconds), Percent and Ratio (float).
Report.from_json reads the standard JSON report (kprofd's or TVM's); as_json, as_table and
as_csv write what `kprof report` writes for the same report.
"""

import json
import math

from kprof.report_metrics import (COUNT, DEVICE, DURATION, NAME, PERCENT, SHAPES, Count, Duration,
                                  Percent, Ratio, _column_sums, _map_from_json, _metric_to_json,
                                  _number_json, _sort_key, _sorted_by_bytes, aggregate_calls,
                                  format_for_table, kind_of, shortest_decimal, table_columns)
from kprof.report_html import report_html


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
