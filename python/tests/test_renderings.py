"""The Python client's renderings against the C++ ones: report tables, CSV, JSON, traces and
HTML (`kprof report`), plots and Google Benchmark documents, pictures rendered in a real
headless Chromium."""

import json
import math
import os
import re
import subprocess
import tempfile

import pytest

import kprof
from kprof.report import Count, Duration, Percent, Ratio, Report, shortest_decimal

from conftest import KPROF


def kprof_report(report_json, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(report_json)
    try:
        return subprocess.run([KPROF, "report", f.name, *args], check=True, capture_output=True,
                              text=True).stdout
    finally:
        os.unlink(f.name)


# A report that exercises the renderings: aggregation of repeated calls, mixed kinds in one
# column, ratios, big counts, non-finite numbers, quotes, commas, non-ASCII names.


TRICKY = Report(
    calls=[
        {"Name": "matmul", "Duration (us)": Duration(812.5), "Count": Count(1),
         "Percent": Percent(61.0), "Device": "cpu0", "Argument Shapes": "float32[256, 256]",
         "Ratio": Ratio(0.5), "Faults": Count(1234567)},
        {"Name": "matmul", "Duration (us)": Duration(1000.25), "Count": Count(2),
         "Percent": Percent(10.0), "Device": "cpu0", "Argument Shapes": "float32[256, 256]",
         "Ratio": Ratio(0.25), "Faults": Count(3)},
        {"Name": "relu \"fused\", ünïcode", "Duration (us)": Duration(1e-7), "Count": Count(5),
         "Device": "cpu0", "Note": "a,b"},
        {"Name": "nan call", "Duration (us)": Duration(math.nan), "Mixed": Count(7)},
        {"Name": "big", "Duration (us)": Duration(123456789.125), "Mixed": "text",
         "Ratio": Ratio(1e20)},
    ],
    device_metrics={"cpu0": {"Duration (us)": Duration(2000.0), "Name": "Total"},
                    "cuda0": {"Duration (us)": Duration(math.inf)}},
    configuration={"Number of threads": Count(2), "Host": "lab-1", "Load": Ratio(0.125)})


@pytest.mark.parametrize("options", [(), ("--no-aggregate",), ("--no-sort",), ("--no-sums",),
                                     ("--no-aggregate", "--no-sort", "--no-sums")])
def test_tables_match_the_cli(options):
    text = TRICKY.as_json()
    expected = kprof_report(text, *options)
    # The same report on both sides: as read back from the JSON (where inf became null, NaN).
    table = Report.from_json(text).as_table(sort="--no-sort" not in options,
                            aggregate="--no-aggregate" not in options,
                            col_sums="--no-sums" not in options)
    assert table == expected


def test_csv_and_json_match_the_cli():
    text = TRICKY.as_json()
    assert TRICKY.as_csv() == kprof_report(text, "--format", "csv")
    assert json.loads(kprof_report(text, "--format", "json")) == json.loads(text)
    assert Report.from_json(kprof_report(text, "--format", "json")).as_json() == text


def test_traces_match_the_cli():
    """The Chrome trace event format, byte for byte as `kprof report --format trace`, and a
    trace by the format's rules: a named track per device, slices end to end on each."""
    text = TRICKY.as_json()
    back = Report.from_json(text)
    assert back.as_trace() + "\n" == kprof_report(text, "--format", "trace")
    trace = json.loads(back.as_trace())
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["cpu0", "cuda0", "unknown device"]
    cpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and names[e["tid"]] == "cpu0"]
    assert [e["name"] for e in cpu] == ["matmul", "matmul", 'relu "fused", ünïcode']
    assert cpu[1]["ts"] == cpu[0]["ts"] + cpu[0]["dur"] == 812.5
    assert cpu[0]["args"]["Faults"] == 1234567


def test_html_pages_match_the_cli_and_render_in_a_real_browser():
    """`kprof report --format html` and Report.as_html(), byte for byte; the page in headless
    Chromium: bars drawn, the devices and calls named."""
    text = TRICKY.as_json()
    back = Report.from_json(text)
    page = kprof_report(text, "--format", "html")
    assert back.as_html() == page
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "report.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        (_, _, rows), dom = _render_in_chromium(path, scratch, "900,700")
        pixels = [p for row in rows for p in row]
        bars = sum(1 for r, g, b in pixels
                   if abs(r - 0x4a) < 24 and abs(g - 0x78) < 24 and abs(b - 0xc2) < 24)
        assert bars > 500, f"{bars} bar pixels"
        for label in ("cpu0", "unknown device", "matmul", "Calls by device", "Configuration"):
            assert label in dom, label
        # A table of the calls, longest first, that sorts: by name, either way, on opening
        # with "#sort=N" as on a click of the heading.
        assert '<table class="sortable">' in dom and "<th>Duration (us)</th>" in dom

        def names(dom):
            body = dom[dom.index("<tbody>"):dom.index("</tbody>")]
            return [cell.split("</td>")[0] for cell in body.split("<tr><td>")[1:]]
        assert names(dom) == ["big", "matmul", "relu \"fused\", ünïcode", "nan call"]
        by_name = _dump_dom(path + "#sort=0", scratch)
        assert names(by_name) == ["big", "matmul", "nan call", "relu \"fused\", ünïcode"]
        assert names(_dump_dom(path + "#sort=-0", scratch)) == list(reversed(names(by_name)))


def test_reports_read_back_with_their_kinds():
    back = Report.from_json(TRICKY.as_json(indent=2))
    assert back.calls[0]["Faults"] == 1234567 and isinstance(back.calls[0]["Faults"], Count)
    assert isinstance(back.calls[0]["Ratio"], Ratio)
    assert math.isnan(back.calls[3]["Duration (us)"])
    assert back.configuration == TRICKY.configuration


def test_malformed_reports_name_the_place():
    with pytest.raises(ValueError, match=r'calls\[0\]\."Duration \(us\)": unknown metric kind '
                                         r'"seconds"'):
        Report.from_json('{"calls": [{"Duration (us)": {"seconds": 1}}]}')
    with pytest.raises(ValueError, match="not JSON"):
        Report.from_json("{")
    with pytest.raises(ValueError, match="a count is an integer"):
        Report.from_json('{"calls": [{"Count": {"count": 1.5}}]}')


@pytest.mark.parametrize("value,text", [
    (100.0, "100"), (0.1, "0.1"), (1e16, "1e+16"), (1e15, "1e+15"), (123456.0, "123456"),
    (1e-5, "1e-05"), (0.0001, "1e-04"), (0.001, "0.001"), (-2.5, "-2.5"), (0.0, "0"), (1.5e300, "1.5e+300"),
    (812.5, "812.5"), (math.inf, "inf"), (math.nan, "nan")])
def test_shortest_decimal_is_cxx_to_chars(value, text):
    assert shortest_decimal(value) == text


def _png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG, as Chromium writes them."""
    import struct
    import zlib
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6) and body[12] == 0, body
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(
        width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def _dump_dom(url_path, scratch):
    """The page at `url_path` (a file, with a #fragment) as headless Chromium leaves it after its
    scripts ran."""
    import shutil
    return subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={os.path.join(scratch, 'profile')}", "--dump-dom",
                           "file://" + url_path], check=True, capture_output=True, text=True,
                          timeout=120).stdout


def _render_in_chromium(svg, scratch, size):
    """A screenshot of `svg` by headless Chromium, and the page's text as Chromium read it."""
    import shutil
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: deploy/install-deps.sh installs it"
    png = os.path.join(scratch, os.path.basename(svg) + ".png")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={os.path.join(scratch, 'profile')}"]
    subprocess.run([*common, f"--screenshot={png}", f"--window-size={size}", "file://" + svg],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([*common, "--dump-dom", "file://" + svg], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return _png_pixels(png), dom


def test_plots_render_in_a_real_browser(daemon):
    """kprof time --plot and kprof compare --plot, rendered by headless Chromium: not blank,
    the bars and the verdicts' colours drawn, the labels there."""
    with tempfile.TemporaryDirectory() as scratch:
        times = {}
        for name, us in (("base", 100), ("new", 130)):
            out = os.path.join(scratch, name + ".json")
            with open(out, "w") as f:
                subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                                f"float64:{us}", "--repeat", "20", "--format", "json",
                                *(["--plot", os.path.join(scratch, "repeats.svg")]
                                  if name == "base" else [])],
                               check=True, stdout=f)
            times[name] = out
        # Judged even when the host was busy (a test run beside a build): the picture's verdict
        # colour is what is looked at.
        subprocess.run([KPROF, "compare", times["base"], times["new"], "--accept-noisy", "--plot",
                        os.path.join(scratch, "compare.svg")], check=True, capture_output=True)
        (width, height, rows), dom = _render_in_chromium(os.path.join(scratch, "repeats.svg"),
                                                         scratch, "720,300")
        assert (width, height) == (720, 300)
        pixels = [p for row in rows for p in row]
        inked = sum(1 for p in pixels if p != (255, 255, 255))
        assert inked > 0.05 * len(pixels), f"{inked} of {len(pixels)} pixels drawn"
        assert any(abs(r - 0x4a) < 24 and abs(g - 0x78) < 24 and abs(b - 0xc2) < 24
                   for r, g, b in pixels), "no histogram bars"
        assert "spin_us float64:100" in dom and "median" in dom and "20 repeats" in dom
        (width, height, rows), dom = _render_in_chromium(os.path.join(scratch, "compare.svg"),
                                                         scratch, "720,470")
        pixels = [p for row in rows for p in row]
        red = sum(1 for r, g, b in pixels if r > 150 and g < 90 and b < 90)
        assert red > 200, f"the slower verdict's colour: {red} pixels"
        # Spins of 100 and 130 us: about +30%, or what a busy host made of it; the picture says
        # what the files say.
        medians = {}
        for name, path in times.items():
            with open(path) as f:
                medians[name] = json.load(f)["median"]
        change = (medians["new"] / medians["base"] - 1) * 100
        drawn = re.search(r"slower \+([0-9]+\.[0-9]{2})%", dom)
        assert drawn is not None and abs(float(drawn.group(1)) - change) < 0.011, (change, dom)
        assert "no change" in dom and "base.json -&gt; new.json" in dom


def test_python_plots_are_the_clis_byte_for_byte(daemon, client):
    """BenchmarkResult.as_svg, kprof.pictures.repeats_svg and Comparisons.as_svg draw what
    `kprof time --plot` and `kprof compare --plot` draw, to the byte: one comparison (with both
    sides' repeats beneath) and several (a batch), names to escape."""
    from kprof.pictures import repeats_svg
    with tempfile.TemporaryDirectory() as scratch:
        times = {}
        for name, us in (("base", 60), ("new", 75)):
            out, svg = os.path.join(scratch, name + ".json"), os.path.join(scratch, name + ".svg")
            with open(out, "w") as f:
                subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                                f"float64:{us}", "--repeat", "15", "--format", "json", "--plot",
                                svg], check=True, stdout=f)
            with open(out) as f:
                results = json.load(f)["results"]
            with open(svg) as f:
                assert repeats_svg(f"spin_us float64:{us}", results) == f.read()
            times[name] = out
        plot = os.path.join(scratch, "compare.svg")
        subprocess.run([KPROF, "compare", times["base"], times["new"], "--plot", plot],
                       check=True, capture_output=True)
        with open(plot) as f:
            assert kprof.compare(times["base"], times["new"]).as_svg() == f.read()
        batches = []
        for k, scale in enumerate((1.0, 1.1)):
            path = os.path.join(scratch, f"b{k}.jsonl")
            with open(path, "w") as f:
                for j, name in enumerate(('a<&>"', "b", "c")):
                    f.write(json.dumps({"id": name, "status": "OK", "results": [
                        1e-4 * scale * (1 + 0.01 * ((i * 7 + j) % 5)) for i in range(12)]}) + "\n")
            batches.append(path)
        subprocess.run([KPROF, "compare", *batches, "--plot", plot], check=True,
                       capture_output=True)
        with open(plot) as f:
            assert kprof.compare(*batches).as_svg() == f.read()
        # A stalled repeat on one side and a far fast one on the other: drawn apart in a bar at
        # each end, counted, the axis spanning the rest.
        sides = []
        for k, (at, far) in enumerate(((50e-6, 400e-6), (45e-6, 20e-6))):
            path = os.path.join(scratch, f"far{k}.jsonl")
            repeats = [at * (1 + 0.001 * (i % 7)) for i in range(29)] + [far]
            with open(path, "w") as f:
                f.write(json.dumps({"id": "k", "status": "OK", "results": repeats}) + "\n")
            sides.append(path)
        subprocess.run([KPROF, "compare", *sides, "--plot", plot], check=True,
                       capture_output=True)
        with open(plot) as f:
            drawn = f.read()
        assert kprof.compare(*sides).as_svg() == drawn
        assert "at left: far below, down to 20.000 us" in drawn
        assert "at right: far above, up to 400.000 us" in drawn
        assert 'fill-opacity="0.5"' in drawn and ">45.000 us<" in drawn and ">50.300 us<" in drawn
    live = client.time_evaluate("builtin", "spin_us", args=["float64:20"], repeat=6)
    assert live.as_svg("spin_us float64:20") == repeats_svg("spin_us float64:20", live.results)
    assert repeats_svg("none", []).count("no repeats") == 1
    one_stalled = repeats_svg("t", [1e-6 * (1 + 0.01 * (i % 5)) for i in range(28)] + [9e-5])
    assert "at right: far above, up to 90.000 us" in one_stalled and ">1.040 us<" in one_stalled


def test_python_gbench_is_the_clis_document_and_compare_py_reads_it(daemon, client):
    """BenchmarkResult.as_gbench and kprof.gbench write the document `kprof time --format
    gbench` and `kprof batch --format gbench` write: byte for byte on the same answers (but the
    date), and against the CLI's own runs the same members, names and run types; exact
    aggregates as Google Benchmark computes them; and Google Benchmark's compare.py reads it."""
    from collections import OrderedDict
    from kprof.gbench import gbench_runs
    from kprof.v1 import kprof_pb2

    def shape(doc):
        if isinstance(doc, dict):
            return [(k, shape(v)) for k, v in doc.items() if k not in ("kprof_environment",)]
        if isinstance(doc, list):
            return [shape(v) for v in doc]
        return type(doc).__name__ if not isinstance(doc, bool) else "bool"

    def load(text):
        return json.loads(text, object_pairs_hook=OrderedDict)

    cli = load(subprocess.run([KPROF, "--target", daemon, "time", "builtin", "spin_us", "--arg",
                               "float64:40", "--repeat", "5", "--format", "gbench"],
                              check=True, capture_output=True, text=True).stdout)
    mine = load(client.time_evaluate("builtin", "spin_us", args=["float64:40"], repeat=5)
                .as_gbench("spin_us/float64:40"))
    assert shape(mine) == shape(cli)
    assert [r["name"] for r in mine["benchmarks"]] == [r["name"] for r in cli["benchmarks"]]
    assert sorted(mine["context"]["kprof_environment"]) == \
        sorted(cli["context"]["kprof_environment"])
    assert mine["context"]["host_name"] == cli["context"]["host_name"]
    assert mine["context"]["date"][:10] == cli["context"]["date"][:10]

    # Byte for byte on the same answers: the CLI's rendering of each (its code, in a test tool),
    # but for how a double is spelled. Python writes the shortest digits that read back as the
    # same double; nlohmann's Grisu2 now and then one digit more (5046.0843749999995 for
    # 5046.084374999999): each number is compared as the double it reads as.
    import re
    undated = re.compile(r'"date": "[^"]*"')
    fraction = re.compile(r'(?<=[\s\[:,])-?\d+\.\d+(?:[eE][-+]?\d+)?(?=[\s,\]}])')

    def canonical(text):
        return fraction.sub(lambda m: repr(float(m.group(0))), undated.sub("", text))

    assert canonical('"x": 5046.0843749999995,') == canonical('"x": 5046.084374999999,')
    assert canonical('"x": 1.5,') != canonical('"x": 1.25,')
    for job in ({"args": ["float64:25"], "repeat": 7}, {"args": ["float64:5"], "number": 3,
                                                        "repeat": 2, "min_repeat_ms": 1}):
        result = client.time_evaluate("builtin", "spin_us", **job)
        for name in ("spin_us/" + job["args"][0], "k ü/\"quoted\""):
            rendered = subprocess.run([os.environ["KPROF_TEST_RENDER_GBENCH"], name],
                                      input=result.raw.SerializeToString(), check=True,
                                      capture_output=True).stdout.decode()
            assert canonical(result.as_gbench(name)) == canonical(rendered), name

    jobs = [{"id": "k0", "module": "builtin", "function": "spin_us", "args": ["float64:30"],
             "repeat": 4},
            {"id": "gone", "module": "builtin", "function": "no_such_function"}]
    with tempfile.TemporaryDirectory() as scratch:
        lines = os.path.join(scratch, "jobs.jsonl")
        with open(lines, "w") as f:
            f.write("".join(json.dumps(j) + "\n" for j in jobs))
        run = subprocess.run([KPROF, "--target", daemon, "batch", lines, "--format", "gbench"],
                             capture_output=True, text=True)
        assert run.returncode == 3, run.stderr
        cli = load(run.stdout)
        mine = load(kprof.gbench(client.batch(jobs)))
        assert shape(mine) == shape(cli)
        errors = {r["name"]: r["error_message"] for r in cli["benchmarks"] if "error_message" in r}
        assert errors == {r["name"]: r["error_message"] for r in mine["benchmarks"]
                          if "error_message" in r}
        assert errors["gone"].startswith("NOT_FOUND: ")
        assert "k0/spin_us/float64:30" in [r["name"] for r in mine["benchmarks"]]

        # compare.py on two of ours: the slower one is found slower.
        docs = []
        for us in (100, 130):
            path = os.path.join(scratch, f"{us}.json")
            with open(path, "w") as f:
                f.write(client.time_evaluate("builtin", "spin_us", args=[f"float64:{us}"],
                                             repeat=10).as_gbench("spin"))
            docs.append(path)
        dump = os.path.join(scratch, "out.json")
        subprocess.run(["/usr/bin/python3", "/usr/share/benchmark/compare.py", "--no-color", "-d",
                        dump, "benchmarks", *docs], check=True, capture_output=True)
        with open(dump) as f:
            report = json.load(f)
        medians = [e for e in report if e["name"] == "spin_median"]
        assert medians and medians[0]["measurements"][0]["time"] > 0.15, report

    response = kprof_pb2.TimeEvaluateResponse(seconds_per_call=[1e-6, 2e-6, 3e-6],
                                              numbers=[10, 10, 10])
    runs = {r["name"]: r for r in gbench_runs("x", response)}
    assert runs["x_mean"]["real_time"] == pytest.approx(2000)
    assert runs["x_median"]["real_time"] == pytest.approx(2000)
    assert runs["x_stddev"]["real_time"] == pytest.approx(1000)  # of a sample: n - 1
    assert runs["x_cv"]["real_time"] == pytest.approx(0.5)
    assert runs["x_cv"]["aggregate_unit"] == "percentage" and "time_unit" not in runs["x_cv"]
    assert [r["iterations"] for r in gbench_runs("x", response)][:3] == [10, 10, 10]
