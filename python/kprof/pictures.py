"""Pictures of measurements as self-contained SVG, byte for byte as the CLI draws them
(client/plot_svg.cc): the repeats of one measurement (`kprof time --plot`), and comparisons
(`kprof compare --plot`).

    svg = result.as_svg("spin_us float64:100")        # a BenchmarkResult
    svg = kprof.compare("a.json", "b.json").as_svg()  # a Comparisons
"""

import math

from kprof.report_metrics import xml_escaped as _escaped
from kprof.statistics import median as _median
from kprof.statistics import within_far_out as _within_far_out

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


class _Frame:
    """The axis a histogram is drawn on: from the smallest to the largest repeat within the
    far-out fences of all the repeats it shows, and a slot at either end for the repeats beyond,
    when there are any (plot_svg.cc's Frame)."""

    def __init__(self, seconds=()):
        kept = _within_far_out(seconds) if seconds else [0.0]
        self.low, self.high = min(kept), max(kept)
        self.min, self.max = (min(seconds), max(seconds)) if seconds else (0.0, 0.0)
        self.below, self.above = self.min < self.low, self.max > self.high

    def left(self):
        return _LEFT + (_SLOT if self.below else 0)

    def right(self):
        return _WIDTH - _RIGHT - (_SLOT if self.above else 0)

    def extra(self):
        return 16 if self.below or self.above else 0


_SLOT = 40  # the width of an end's slot


def _bar(x, bottom, width, h, colour, extra=""):
    return ('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>\n'
            % (x, bottom - h, width, h, colour, extra))


def _end_bar(x, count, scale, bottom, colour):
    if count == 0:
        return ""
    h = max(2.0, scale * count)
    return (_bar(x + 6, bottom, _SLOT - 12, h, colour, ' fill-opacity="0.5"')
            + _text(x + _SLOT / 2, bottom - h - 3, str(count), "middle", 10, ' fill="#666"'))


def _histogram_at(seconds, frame, top, height, colour, label):
    low, high, left = frame.low, frame.high, frame.left()
    span = frame.right() - left
    bins = min(max(len(seconds) // 2, 5), 40)
    counts = [0] * bins
    below = above = 0
    for s in seconds:
        if s < low:
            below += 1
        elif s > high:
            above += 1
        else:
            at = (s - low) / (high - low) * bins if high > low else 0
            counts[min(int(max(at, 0.0)), bins - 1)] += 1
    most = max(1, max(counts), below, above)
    scale = height / most
    width = span / bins
    out = [_bar(left + width * b + 1, top + height, max(width - 2, 1.0), scale * counts[b], colour)
           for b in range(bins)]
    out.append(_end_bar(_LEFT, below, scale, top + height, colour))
    out.append(_end_bar(_WIDTH - _RIGHT - _SLOT, above, scale, top + height, colour))
    out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444"/>\n'
               % (_LEFT, top + height, _WIDTH - _RIGHT, top + height))
    median = _median(seconds)
    x = left + (median - low) / (high - low) * span if high > low else float(left)
    out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-width="2" '
               'stroke-dasharray="4 3"/>\n' % (x, top - 4, x, top + height))
    right_half = x > (_LEFT + _WIDTH - _RIGHT) / 2.0  # the label where there is more room
    out.append(_text(x - 4 if right_half else x + 4, top + 8, "median " + _microseconds(median),
                     "end" if right_half else "start", 11, ' fill="#c00"'))
    out.append(_text(_LEFT - 6, top + 12, label, "end", 11))
    out.append(_text(_LEFT - 6, top + height, f"{len(seconds)} repeats", "end", 10,
                     ' fill="#666"'))
    return "".join(out)


def _axis(frame, y):
    out = (_text(frame.left(), y, _microseconds(frame.low), "start", 11)
           + _text(frame.right(), y, _microseconds(frame.high), "end", 11)
           + _text((_LEFT + _WIDTH - _RIGHT) / 2.0, y, "time per call", "middle", 11,
                   ' fill="#666"'))
    if frame.below:
        out += _text(_LEFT, y + 14, "at left: far below, down to " + _microseconds(frame.min),
                     "start", 10, ' fill="#666"')
    if frame.above:
        out += _text(_WIDTH - _RIGHT, y + 14, "at right: far above, up to "
                     + _microseconds(frame.max), "end", 10, ' fill="#666"')
    return out


_COLOURS = {"faster": "#2a8a2a", "slower": "#c0392b", "same": "#555"}


def _drawable(seconds):
    return [s for s in seconds if math.isfinite(s)]


def repeats_svg(title, seconds):
    """A histogram of one measurement's repeats with the median marked, as `kprof time --plot`."""
    seconds = _drawable([float(s) for s in seconds])
    frame = _Frame(seconds)
    out = [_open(300 + frame.extra()),
           _text(_WIDTH / 2.0, 24, title, "middle", 15, ' font-weight="bold"')]
    if not seconds:
        out.append(_text(_WIDTH / 2.0, 150, "no repeats", "middle") + "</svg>\n")
        return "".join(out)
    out.append(_histogram_at(seconds, frame, 50, 200, "#4a78c2", "repeats"))
    out.append(_axis(frame, 272) + "</svg>\n")
    return "".join(out)


def comparison_svg(comparisons, confidence):
    """Each comparison's change within its interval, coloured by verdict; for one comparison,
    its two sides' repeats beneath (`base_seconds`, `new_seconds`), as `kprof compare --plot`."""
    row_height, top = 28, 60
    rows = list(comparisons)
    distributions = len(rows) == 1 and bool(_drawable(rows[0].base_seconds)) and \
        bool(_drawable(rows[0].new_seconds))
    chart = top + len(rows) * row_height + 40
    frame = _Frame(_drawable(rows[0].base_seconds) + _drawable(rows[0].new_seconds)) \
        if distributions else _Frame()
    out = [_open(chart + (330 + frame.extra() if distributions else 0))]
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
        out.append(_text(_WIDTH / 2.0, chart + 16, "the repeats of each side, on one axis",
                         "middle", 13, ' font-weight="bold"'))
        out.append(_histogram_at(base, frame, chart + 40, 110, "#7f8fa6", "base"))
        out.append(_histogram_at(new, frame, chart + 180, 110,
                                 _COLOURS.get(rows[0].verdict, "#aaa"), "new"))
        out.append(_axis(frame, chart + 316))
    out.append("</svg>\n")
    return "".join(out)
