"""Pictures of measurements as self-contained SVG, byte for byte as the CLI draws them
(client/plot_svg.cc): the repeats of one measurement (`kprof time --plot`), and comparisons
(`kprof compare --plot`).

    svg = result.as_svg("spin_us float64:100")        # a BenchmarkResult
    svg = kprof.compare("a.json", "b.json").as_svg()  # a Comparisons
"""

import math

from kprof.report import xml_escaped as _escaped
from kprof.statistics import median as _median

_WIDTH = 720
_LEFT, _RIGHT = 60, 30  # margins of the plotting area


def _text(x, y, text, anchor="start", size=12, extra=""):
    return (f'<text x="{"%.1f" % x}" y="{"%.1f" % y}" font-family="sans-serif" '
            f'font-size="{size}" text-anchor="{anchor}"{extra}>{_escaped(text)}</text>\n')


def _microseconds(seconds):
    return "%.3f us" % (seconds * 1e6)


def _open(height):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
            f'viewBox="0 0 {_WIDTH} {height}">\n<rect width="100%" height="100%" fill="white"/>\n')


def _histogram_at(seconds, low, high, top, height, colour, label):
    out = []
    bins = min(max(len(seconds) // 2, 5), 40)
    counts = [0] * bins
    for s in seconds:
        at = (s - low) / (high - low) * bins if high > low else 0
        counts[min(int(max(at, 0.0)), bins - 1)] += 1
    most = max(1, max(counts))
    width = (_WIDTH - _LEFT - _RIGHT) / bins
    for b in range(bins):
        h = height * counts[b] / most
        out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>\n'
                   % (_LEFT + width * b + 1, top + height - h, max(width - 2, 1.0), h, colour))
    out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444"/>\n'
               % (_LEFT, top + height, _WIDTH - _RIGHT, top + height))
    median = _median(seconds)
    x = _LEFT + (median - low) / (high - low) * (_WIDTH - _LEFT - _RIGHT) if high > low \
        else float(_LEFT)
    out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-width="2" '
               'stroke-dasharray="4 3"/>\n' % (x, top - 4, x, top + height))
    out.append(_text(x + 4, top + 8, "median " + _microseconds(median), "start", 11,
                     ' fill="#c00"'))
    out.append(_text(_LEFT - 6, top + 12, label, "end", 11))
    out.append(_text(_LEFT - 6, top + height, f"{len(seconds)} repeats", "end", 10,
                     ' fill="#666"'))
    return "".join(out)


def _axis(low, high, y):
    return (_text(_LEFT, y, _microseconds(low), "start", 11)
            + _text(_WIDTH - _RIGHT, y, _microseconds(high), "end", 11)
            + _text((_LEFT + _WIDTH - _RIGHT) / 2.0, y, "time per call", "middle", 11,
                    ' fill="#666"'))


_COLOURS = {"faster": "#2a8a2a", "slower": "#c0392b", "same": "#555"}


def _drawable(seconds):
    return [s for s in seconds if math.isfinite(s)]


def repeats_svg(title, seconds):
    """A histogram of one measurement's repeats with the median marked, as `kprof time --plot`."""
    seconds = _drawable([float(s) for s in seconds])
    out = [_open(300), _text(_WIDTH / 2.0, 24, title, "middle", 15, ' font-weight="bold"')]
    if not seconds:
        out.append(_text(_WIDTH / 2.0, 150, "no repeats", "middle") + "</svg>\n")
        return "".join(out)
    low, high = min(seconds), max(seconds)
    out.append(_histogram_at(seconds, low, high, 50, 200, "#4a78c2", "repeats"))
    out.append(_axis(low, high, 272) + "</svg>\n")
    return "".join(out)


def comparison_svg(comparisons, confidence):
    """Each comparison's change within its interval, coloured by verdict; for one comparison,
    its two sides' repeats beneath (`base_seconds`, `new_seconds`), as `kprof compare --plot`."""
    row_height, top = 28, 60
    rows = list(comparisons)
    distributions = len(rows) == 1 and bool(_drawable(rows[0].base_seconds)) and \
        bool(_drawable(rows[0].new_seconds))
    chart = top + len(rows) * row_height + 40
    out = [_open(chart + (330 if distributions else 0))]
    out.append(_text(_WIDTH / 2.0, 24, "change of the median, new against base, with its "
                     "%g%% interval" % (confidence * 100), "middle", 14, ' font-weight="bold"'))
    reach = 0.01
    for c in rows:
        for v in (c.change, c.interval[0], c.interval[1]):
            if math.isfinite(v):
                reach = max(reach, abs(v))
    reach *= 1.15
    chart_left, chart_right = _LEFT + 200, _WIDTH - 130
    half = (chart_right - chart_left) / 2
    mid = chart_left + half

    def x_of(change):
        return mid + change / reach * half

    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888" '
               'stroke-dasharray="2 2"/>\n' % (mid, top - 10, mid, chart - 30))
    out.append(_text(mid, chart - 14, "no change", "middle", 11, ' fill="#666"'))
    out.append(_text(x_of(-reach / 1.15), chart - 14, "%+.1f%%" % (-reach / 1.15 * 100),
                     "middle", 11))
    out.append(_text(x_of(reach / 1.15), chart - 14, "%+.1f%%" % (reach / 1.15 * 100), "middle",
                     11))
    for i, c in enumerate(rows):
        y = top + i * row_height + row_height / 2.0
        colour = _COLOURS.get(c.verdict, "#aaa")
        out.append(_text(_LEFT + 190, y + 4, c.name, "end", 12))
        if math.isfinite(c.interval[0]) and math.isfinite(c.interval[1]):
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" '
                       'stroke-width="3"/>\n'
                       % (x_of(c.interval[0]), y, x_of(c.interval[1]), y, colour))
        if math.isfinite(c.change):
            out.append('<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>\n'
                       % (x_of(c.change), y, colour))
        label = c.verdict + (" %+.2f%%" % (c.change * 100) if math.isfinite(c.change) else "")
        out.append(_text(_WIDTH - 8, y + 4, label, "end", 11, f' fill="{colour}"'))
    if distributions:
        base, new = _drawable(rows[0].base_seconds), _drawable(rows[0].new_seconds)
        low, high = min(min(base), min(new)), max(max(base), max(new))
        out.append(_text(_WIDTH / 2.0, chart + 16, "the repeats of each side, on one axis",
                         "middle", 13, ' font-weight="bold"'))
        out.append(_histogram_at(base, low, high, chart + 40, 110, "#7f8fa6", "base"))
        out.append(_histogram_at(new, low, high, chart + 180, 110,
                                 _COLOURS.get(rows[0].verdict, "#aaa"), "new"))
        out.append(_axis(low, high, chart + 316))
    out.append("</svg>\n")
    return "".join(out)
