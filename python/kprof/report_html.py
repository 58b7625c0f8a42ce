"""A Report as a self-contained HTML page (report::AsHtml, byte for byte): each device's calls
as bars, then a table of them that sorts by the column clicked, then the configuration."""

import math

from kprof.report_metrics import (DEVICE, DURATION, NAME, aggregate_calls, format_for_table, kind_of,
                          shortest_decimal, table_columns, xml_escaped)


def report_html(report):
    """The page `kprof report --format html` writes: each device's calls, aggregated, as
    bars, then the table."""
    def text_of(call, metric, fallback):
        value = call.get(metric)
        return str(value) if value is not None and kind_of(value) == "string" else fallback

    def duration_of(call):
        value = call.get(DURATION)
        if value is None or kind_of(value) != "microseconds":
            return 0.0
        us = float(value)
        return us if math.isfinite(us) and us > 0 else 0.0

    by_device, longest = {}, 0.0
    for call in aggregate_calls(report.calls):
        by_device.setdefault(text_of(call, DEVICE, "unknown device"), []).append(call)
        longest = max(longest, duration_of(call))
    height = 10 + sum(28 + 22 * len(calls) for calls in by_device.values())
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="820" height="{height}">\n']
    y = 10
    for device in sorted(by_device, key=str.encode):
        svg.append(f'<text x="0" y="{y + 16}" font-size="14" font-weight="bold">'
                   f"{xml_escaped(device)}</text>\n")
        y += 28
        for call in by_device[device]:
            us = duration_of(call)
            width = 460 * us / longest if longest > 0 else 0.0
            svg.append(f'<text x="212" y="{y + 13}" font-size="12" text-anchor="end">'
                       f"{xml_escaped(text_of(call, NAME, 'call'))}</text>\n")
            svg.append(f'<rect x="220" y="{y}" width="{"%.1f" % width}" height="16" '
                       'fill="#4a78c2"/>\n')
            svg.append(f'<text x="{"%.1f" % (220 + width + 6)}" y="{y + 13}" '
                       f'font-size="11">{"%.3f" % us} us</text>\n')
            y += 22
    svg.append("</svg>\n")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kprof report"
            "</title>\n<style>body{font-family:sans-serif;margin:24px}table{border-collapse:"
            "collapse;font-size:13px}th,td{border:1px solid #ccc;padding:2px 8px}"
            "td[data-v]{text-align:right}thead th{cursor:pointer;background:#eee}</style>"
            "</head>\n<body>\n<h1>kprof report</h1>\n<h2>Calls by device</h2>\n"
            + "".join(svg) + "<h2>Calls</h2>\n" + _html_table(report, duration_of)
            + _SORT_SCRIPT + "</body></html>\n")


def _html_table(report, duration_of):
    """The calls as a table that sorts, totals beneath, then the configuration (the CLI's
    HtmlTable)."""
    rows = aggregate_calls(report.calls)
    rows.sort(key=duration_of, reverse=True)
    totals = []
    for device, metrics in sorted(report.device_metrics.items()):
        total = dict(metrics)
        total[NAME] = "Total"
        totals.append(total)
    columns = table_columns(rows + totals)

    def row_html(row):
        cells = []
        for column in columns:
            if column not in row:
                cells.append("<td></td>")
                continue
            value = row[column]
            kind = kind_of(value)
            v = "" if kind == "string" else \
                str(int(value)) if kind == "count" else shortest_decimal(float(value))
            cells.append((f'<td data-v="{v}">' if v else "<td>")
                         + xml_escaped(format_for_table(value)) + "</td>")
        return "<tr>" + "".join(cells) + "</tr>\n"

    out = ['<table class="sortable">\n<thead><tr>']
    out += [f"<th>{xml_escaped(c)}</th>" for c in columns]
    out.append("</tr></thead>\n<tbody>\n")
    out += [row_html(row) for row in rows]
    out.append("</tbody>\n<tfoot>\n")
    out += [row_html(total) for total in totals]
    out.append("</tfoot>\n</table>\n<h2>Configuration</h2>\n<table>\n")
    for name, value in sorted(report.configuration.items()):
        out.append(f"<tr><th>{xml_escaped(name)}</th><td>"
                   f"{xml_escaped(format_for_table(value))}</td></tr>\n")
    return "".join(out) + "</table>\n"


# Sorts a table.sortable by the heading clicked, or on opening by "#sort=N" / "#sort=-N" (the
# CLI's kSortScript, character for character).
_SORT_SCRIPT = (
    "<script>\n"
    "function kprofSort(t,i,asc){var b=t.tBodies[0],r=Array.from(b.rows);"
    "r.sort(function(x,y){var a=x.cells[i],c=y.cells[i],p=a.dataset.v,q=c.dataset.v;"
    "var d=(p!==undefined&&q!==undefined)?p-q:a.textContent.localeCompare(c.textContent);"
    "return asc?d:-d});r.forEach(function(e){b.appendChild(e)});t.dataset.sorted=i+(asc?'':'-')}\n"
    "document.querySelectorAll('table.sortable').forEach(function(t){"
    "t.tHead.querySelectorAll('th').forEach(function(h,i){h.addEventListener('click',function(){"
    "kprofSort(t,i,t.dataset.sorted!==String(i))})});"
    "var m=/^#sort=(-?)(\\d+)$/.exec(location.hash);if(m)kprofSort(t,+m[2],m[1]!=='-')});\n"
    "</script>\n")
