"""kprof.compare and kprof.rank against `kprof compare` and `kprof rank` (byte for byte) and scipy,
and races over real daemons."""

import json
import math
import os
import subprocess
import tempfile

import pytest

import kprof

from conftest import KPROF, MODULES


def test_kprof_compare_agrees_with_scipys_u_test():
    """kprof compare's p-values against scipy.stats.mannwhitneyu on the same repeats: small
    samples without ties (exact), with ties and large ones (the normal approximation), shifted
    and not."""
    import random
    from scipy.stats import mannwhitneyu
    rng = random.Random(20261202)
    cases = []
    for n1, n2, shift, ties in [(5, 5, 1.0, False), (4, 7, 1.02, False), (8, 30, 1.01, False),
                                (12, 12, 1.0, True), (30, 30, 1.01, False), (50, 40, 1.003, True),
                                (9, 9, 1.05, False), (6, 600, 1.002, False)]:
        draw = (lambda: round(rng.lognormvariate(0, 0.01), 3)) if ties else \
            (lambda: rng.lognormvariate(0, 0.01))
        base = [1e-3 * draw() for _ in range(n1)]
        new = [1e-3 * shift * draw() for _ in range(n2)]
        cases.append((base, new))
    with tempfile.TemporaryDirectory() as scratch:
        for k, (base, new) in enumerate(cases):
            paths = []
            for side, repeats in (("base", base), ("new", new)):
                paths.append(os.path.join(scratch, f"{side}{k}.json"))
                with open(paths[-1], "w") as f:
                    json.dump({"results": repeats}, f)
            out = subprocess.run([KPROF, "compare", *paths, "--format", "json",
                                  "--min-repeats", "1"], check=True, capture_output=True,
                                 text=True).stdout
            got = json.loads(out)["comparisons"][0]
            expected = mannwhitneyu(base, new, alternative="two-sided").pvalue
            assert math.isclose(got["p_value"], expected, rel_tol=1e-9, abs_tol=1e-15), \
                (len(base), len(new), got["p_value"], expected)
            assert got["interval"][0] <= got["interval"][1], got


def test_compare_gives_the_clis_output_byte_for_byte():
    """kprof.compare against `kprof compare` on the same files, in every format: kprof time
    JSON (ties, exact and approximate U tests, too few repeats), kprof batch JSONL (a failed
    job, ids in one file only, names to quote), Google Benchmark JSON, and files matched by
    call."""
    import random
    rng = random.Random(7)

    def repeats(n, scale, digits=None):
        values = [scale * rng.lognormvariate(0, 0.02) for _ in range(n)]
        return [round(v, digits) for v in values] if digits else values

    def batch_file(path, shift, prefix=""):
        with open(path, "w") as f:
            for k, (n, digits) in enumerate([(30, None), (6, None), (12, 6), (4, None),
                                             (40, None), (9, 7)]):
                f.write(json.dumps({"id": f'{prefix}k{k} "q",x', "status": "OK",
                                    "module": "m.so", "function": "gemm", "args": [f"a{k}"],
                                    "results": repeats(n, 1e-3 * (1 + shift * k), digits)})
                        + "\n")
            f.write(json.dumps({"id": f"{prefix}broken", "status": "NOT_FOUND",
                                "error": "no function"}) + "\n")
            f.write(json.dumps({"id": f"{prefix}only-{shift}", "status": "OK",
                                "results": repeats(10, 1e-6)}) + "\n")

    def gbench_file(path, scale):
        runs = []
        for name, n in (("BM_a/8", 12), ("BM_b", 3)):
            for v in repeats(n, 800 * scale):
                runs.append({"name": name, "run_name": name, "run_type": "iteration",
                             "real_time": v, "cpu_time": v, "time_unit": "us"})
            runs.append({"name": name + "_mean", "run_name": name, "run_type": "aggregate",
                         "real_time": 1.0, "cpu_time": 1.0, "time_unit": "us"})
        with open(path, "w") as f:
            json.dump({"context": {}, "benchmarks": runs}, f)

    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, values in (("t1", repeats(5, 2e-4)), ("t2", repeats(7, 2.2e-4)),
                             ("t3", repeats(25, 2e-4, 6)), ("t4", repeats(3, 2e-4))):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "w") as f:
                json.dump({"module": "builtin", "function": "spin_us", "results": values}, f)
        files["b1"], files["b2"] = os.path.join(d, "b1.jsonl"), os.path.join(d, "b2.jsonl")
        batch_file(files["b1"], 0.0)
        batch_file(files["b2"], 0.02)
        files["b3"] = os.path.join(d, "b3.jsonl")
        batch_file(files["b3"], 0.01, prefix="other-")
        files["g1"], files["g2"] = os.path.join(d, "g1.json"), os.path.join(d, "g2.json")
        gbench_file(files["g1"], 1.0)
        gbench_file(files["g2"], 0.93)
        # Odd shapes both read alike: repeats of no time (an infinite change, a resample without
        # a ratio), one side of 6 against 2000 (the exact test over many orderings), a byte-order
        # mark and CRLF lines, members of the wrong type.
        for name, values in (("z0", [0.0] * 6), ("z1", [0.0, 0.0, 0.0, 1e-6, 2e-6, 3e-6]),
                             ("long", repeats(2000, 2.1e-4))):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "w") as f:
                json.dump({"results": values}, f)
        files["crlf"] = os.path.join(d, "crlf.jsonl")
        with open(files["crlf"], "w", encoding="utf-8-sig", newline="") as f:
            for k in range(3):
                f.write(json.dumps({"id": f'k{k} "q",x', "status": "OK",
                                    "results": repeats(12, 1e-3)}) + "\r\n")
        # Noisy: a warning of kprofd's, a run that did not converge.
        for name, extra in (("n1", {"warnings": ["the host was busy: the measuring thread waited "
                                                 "for a CPU 40% of the measurement (400.0 ms of 1.00 s; "
                                                 "threshold 5%): a note past 100 columns"]}),
                            ("n2", {"converged": False, "rel_stddev": 0.24, "warnings": []})):
            files[name] = os.path.join(d, name + ".json")
            with open(files[name], "w") as f:
                json.dump({"results": repeats(20, 2.4e-4), **extra}, f)
        files["odd"] = os.path.join(d, "odd.json")
        with open(files["odd"], "w") as f:
            json.dump({"benchmarks": [
                {"name": 7, "run_name": "BM_a/8", "run_type": 5, "real_time": 800.0,
                 "time_unit": "us", "error_occurred": 1},
                {"name": "BM_b", "real_time": 3.0, "time_unit": 4, "error_occurred": False}]}, f)
        pairs = [("t1", "t2", []), ("t3", "t1", []), ("t1", "t4", []),
                 ("t2", "t3", ["--confidence", "0.99", "--threshold", "0"]),
                 ("b1", "b2", []), ("b1", "b3", []),
                 ("b2", "b1", ["--min-repeats", "3", "--resamples", "500"]), ("g1", "g2", []),
                 ("z0", "t1", []), ("z1", "t1", []), ("t1", "long", ["--resamples", "100"]),
                 ("crlf", "b1", []), ("g1", "odd", ["--min-repeats", "1"]),
                 ("t3", "n1", []), ("n2", "n1", []), ("t3", "n2", ["--accept-noisy"]),
                 ("n1", "t4", [])]
        for base, new, options in pairs:
            kwargs = {"confidence": 0.95, "threshold": 1.0, "min_repeats": 5, "resamples": 2000}
            if "--accept-noisy" in options:
                kwargs["accept_noisy"] = True
            valued = [o for o in options if o != "--accept-noisy"]
            for flag, value in zip(valued[::2], valued[1::2]):
                key = flag[2:].replace("-", "_")
                kwargs[key] = int(value) if key in ("min_repeats", "resamples") else float(value)
            result = kprof.compare(files[base], files[new], **kwargs)
            for fmt, rendered in (("table", result.as_table()), ("json", result.as_json()),
                                  ("csv", result.as_csv())):
                cli = subprocess.run([KPROF, "compare", files[base], files[new], "--format", fmt,
                                      *options], check=True, capture_output=True,
                                     text=True).stdout
                assert rendered == cli, (base, new, fmt, rendered, cli)
        verdicts = {c.name: c.verdict for c in kprof.compare(files["b1"], files["b2"]).comparisons}
        assert verdicts['k5 "q",x'] == "slower" and verdicts['k3 "q",x'] == "insufficient"
        # Noisy on either side: not judged, unless asked; too few repeats stay insufficient.
        [noisy] = kprof.compare(files["t3"], files["n1"]).comparisons
        assert noisy.verdict == "noisy" and noisy.noise.startswith("new: the host was busy")
        [unconverged] = kprof.compare(files["t3"], files["n2"]).comparisons
        assert unconverged.noise == "new: its repeats did not converge (relative std 24.0%)"
        [judged] = kprof.compare(files["t3"], files["n2"], accept_noisy=True).comparisons
        assert judged.verdict == "slower" and judged.noise
        assert kprof.compare(files["n1"], files["t4"]).comparisons[0].verdict == "insufficient"
        with pytest.raises(ValueError, match="is a directory"):
            kprof.compare(d, files["t1"])
        assert kprof.compare_repeats([1e-3] * 5, [2e-3] * 5).verdict == "slower"


def test_rank_gives_the_clis_output_byte_for_byte():
    """kprof.rank_results against `kprof rank` on the same files, in every format: ties, clear
    losers, sizes counted exactly and past 2^100 orderings (the normal approximation), too few
    repeats to decide, a failed job, a repeat of no time, names to quote, other options."""
    import random
    rng = random.Random(11)

    def repeats(n, scale, cv=0.01):
        return [scale * rng.lognormvariate(0, cv) for _ in range(n)]

    with tempfile.TemporaryDirectory() as d:
        batch = os.path.join(d, "batch.jsonl")
        with open(batch, "w") as f:
            for name, values in (("fast", repeats(30, 1e-3)), ('tie "q",x', repeats(30, 1.002e-3)),
                                 ("close", repeats(12, 1.01e-3)), ("slow", repeats(10, 1.2e-3)),
                                 ("few", repeats(3, 1.0e-3)), ("zero", [0.0, 1e-3, 1e-3]),
                                 ("schnell-ü", repeats(150, 1.001e-3, 0.005)),
                                 ("wide", repeats(150, 1.3e-3, 0.2))):
                f.write(json.dumps({"id": name, "status": "OK", "results": values},
                                   ensure_ascii=False) + "\n")
            f.write(json.dumps({"id": "broken", "status": "NOT_FOUND", "error": "no function"})
                    + "\n")
            f.write(json.dumps({"id": "busy", "status": "OK", "results": repeats(30, 0.9e-3),
                                "warnings": ["the host was busy"]}) + "\n")
            f.write(json.dumps({"ranking": {"fastest": "fast"}}) + "\n")  # a race's last line
        single = os.path.join(d, "single.json")
        with open(single, "w") as f:
            json.dump({"results": repeats(70, 0.99e-3)}, f)  # 70 against 150: past 2^100
        for options in ([], ["--threshold", "0"], ["--threshold", "2.5", "--confidence", "0.8"],
                        ["--accept-noisy"]):
            threshold = float(options[options.index("--threshold") + 1]) \
                if "--threshold" in options else 1.0
            confidence = float(options[options.index("--confidence") + 1]) \
                if "--confidence" in options else 0.95
            ranking = kprof.rank_results(batch, single, confidence=confidence,
                                         threshold=threshold,
                                         accept_noisy="--accept-noisy" in options)
            for fmt, text in (("table", ranking.as_table()), ("json", ranking.as_json()),
                              ("csv", ranking.as_csv())):
                cli = subprocess.run([KPROF, "rank", batch, single, "--format", fmt, *options],
                                     capture_output=True, text=True)
                assert cli.returncode == 0, cli.stderr
                assert text == cli.stdout, (fmt, options)
        states = {c.name: c.state for c in kprof.rank_results(batch, single).candidates}
        assert states["single.json"] == "fastest"
        # The fastest of all, but measured on a busy host: not ranked unless asked.
        assert states["busy"] == "failed"
        assert kprof.rank_results(batch, single, accept_noisy=True).fastest == "busy"
        assert states["slow"] == "slower" and states["wide"] == "slower"
        assert states["zero"] == "failed" and states["broken"] == "failed"
        assert states["few"] == "undecided"
        with pytest.raises(ValueError, match="the measurement 'single.json' is twice in"):
            kprof.rank_results(single, single)


def test_rank_selects_the_differences_without_holding_them():
    """The shift's order statistics selected among the m x n differences are the bits sorting
    every one of them gives (ties included); and two files of 20 000 repeats each, whose 400
    million differences took the CLI 3 GB, rank in Python and the CLI alike."""
    import random
    from kprof.ranking import _lower_count, shift_interval
    from kprof.statistics import median
    rng = random.Random(5)

    def every_difference(base, new, alpha):
        x, y = [math.log(v) for v in base], [math.log(v) for v in new]
        d = sorted(b - a for a in x for b in y)
        c = _lower_count(len(x), len(y), alpha)
        return (median(d), -math.inf, math.inf) if c < 1 else (median(d), d[c - 1], d[-c])

    for trial in range(150):
        m, n = rng.randint(1, 70), rng.randint(1, 70)
        if trial % 2 == 0:  # a coarse clock's few values: ties within and across the samples
            base = [1e-6 * rng.randint(1, 4) for _ in range(m)]
            new = [1e-6 * rng.randint(1, 4) for _ in range(n)]
        else:
            base = [1e-4 * rng.lognormvariate(0, 0.05) for _ in range(m)]
            new = [1e-4 * rng.lognormvariate(0, 0.05) for _ in range(n)]
        assert shift_interval(base, new, 0.05) == every_difference(base, new, 0.05), trial
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, scale in (("a", 1e-3), ("b", 1.02e-3)):
            paths.append(os.path.join(d, name + ".json"))
            with open(paths[-1], "w") as f:
                json.dump({"results": [scale * rng.lognormvariate(0, 0.02)
                                       for _ in range(20000)]}, f)
        cli = subprocess.run([KPROF, "rank", *paths, "--format", "json"], capture_output=True,
                             text=True, timeout=120)
        assert cli.returncode == 0, cli.stderr
        assert kprof.rank_results(*paths).as_json() == cli.stdout
        assert [c.state for c in kprof.rank_results(*paths).candidates] == ["fastest", "slower"]


def _race_on(costs, seed, **options):
    """A Race over simulated kernels (log-normal, 1% spread, 2% of repeats 3x): (Ranking,
    repeats it measured)."""
    import random
    rng = random.Random(seed)

    def draw(cost, n):
        return [cost * rng.lognormvariate(0, 0.01) * (3 if rng.random() < 0.02 else 1)
                for _ in range(n)]

    race = kprof.Race([f"k{i}" for i in range(len(costs))], **options)
    measured = 0
    while True:
        planned = race.next_round()
        if not planned:
            return race.current(), measured
        for i, add in planned:
            race.add(i, draw(costs[i], add))
            measured += add


def test_a_race_finds_the_tie_set_in_under_half_a_fixed_plans_repeats():
    """20 candidates, 3 within 0.5% of each other, the rest 5% and more slower: the race names
    exactly the 3, decided, and a fixed plan given twice the race's repeats is right less
    often than the confidence promises (as core's RaceTest, on fewer runs)."""
    import random
    costs = [100e-6, 100.3e-6, 100.5e-6] + [100e-6 * (1.05 + 0.02 * i) for i in range(17)]
    runs, right, total = 8, 0, 0
    for seed in range(runs):
        ranking, measured = _race_on(costs, seed)
        total += measured
        right += ranking.decided and sorted(ranking.ties) == ["k0", "k1", "k2"]
        assert all(c.repeats <= 23 for c in ranking.candidates if c.state == "slower")
    assert right == runs
    each = math.ceil(2 * total / runs / len(costs))
    fixed_right = 0
    for seed in range(runs):
        rng = random.Random(100 + seed)
        ranking = kprof.rank_repeats({f"k{i}": [c * rng.lognormvariate(0, 0.01) *
                                                (3 if rng.random() < 0.02 else 1)
                                                for _ in range(each)]
                                      for i, c in enumerate(costs)})
        fixed_right += ranking.decided and sorted(ranking.ties) == ["k0", "k1", "k2"]
    assert fixed_right < runs * 0.95, (each, fixed_right)


def test_client_and_farm_rank_modules_that_share_an_entry_point(client, three_daemons):
    """A race through a Client and through a Farm of three daemons: candidate_1 under two ids
    ties with itself, candidate_2 and candidate_3 (twice and three times its cost) stop after
    the first round; each result holds all its candidate's repeats."""
    jobs = [{"id": name, "module": os.path.join(MODULES, module + ".so"), "function": "gemm"}
            for name, module in (("one", "candidate_1"), ("two", "candidate_2"),
                                 ("again", "candidate_1"), ("three", "candidate_3"))]
    farm = kprof.farm(",".join(target for _, target in three_daemons))
    with farm:
        for runner in (client, farm):
            ranking = runner.rank(jobs, threshold=5, max_repeats=40)
            assert sorted(ranking.ties) == ["again", "one"], ranking.as_table()
            by_name = {c.name: c for c in ranking.candidates}
            for loser, change in (("two", 1.0), ("three", 2.0)):
                assert by_name[loser].state == "slower"
                assert by_name[loser].repeats <= 15
                assert by_name[loser].change == pytest.approx(change, abs=0.3)
            for name, c in by_name.items():
                assert len(ranking.results[name].results) == c.repeats
                assert ranking.results[name].median == pytest.approx(c.median)
            assert ranking.repeats == sum(c.repeats for c in ranking.candidates)
            assert ranking.seconds > 0
            line = json.loads(ranking.as_line())
            assert line["ranking"]["fastest"] in ("one", "again")


def test_a_race_whose_fastest_fails_late_keeps_the_slower_slower():
    race = kprof.Race(["fast", "slow"])
    race.next_round()
    race.add(0, [1e-3 * (1 + 0.001 * i) for i in range(10)])
    race.add(1, [2e-3 * (1 + 0.001 * i) for i in range(10)])
    assert race.next_round() == []
    race.fail(0, "UNAVAILABLE: the daemon went away")
    ranking = race.current()
    assert ranking.fastest is None and ranking.ties == []
    assert [(c.name, c.state) for c in ranking.candidates] == [("slow", "slower"),
                                                                ("fast", "failed")]
    assert "fastest: none left (every candidate failed, or was found slower" in ranking.as_table()


def test_rank_refuses_what_it_cannot_race(client):
    good = {"id": "a", "module": "builtin", "function": "nop"}
    with pytest.raises(ValueError, match="leave out 'repeat'"):
        client.rank([good, dict(good, id="b", repeat=3)])
    with pytest.raises(ValueError, match="used twice"):
        client.rank([good, good])
    with pytest.raises(ValueError, match="budget"):
        client.rank([good], budget=-1)
    with pytest.raises(ValueError, match="initial 1"):
        client.rank([good], initial=1)
    with pytest.raises(ValueError, match="confidence"):
        kprof.rank_repeats({"a": [1.0]}, confidence=1)
    ranking = client.rank([good, {"id": "gone", "module": "builtin", "function": "no_such"}])
    states = {c.name: c for c in ranking.candidates}
    assert states["gone"].state == "failed" and "NOT_FOUND" in states["gone"].error
    assert states["a"].state == "fastest"


def test_files_nested_too_deep_or_holding_long_values_are_refused_as_the_cli_refuses_them():
    """64 levels of nesting at most (a million overflowed the CLI's stack and Python's
    recursion), and a value echoed in an error cut to 60 characters: the CLI's words."""
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.json")
        with open(good, "w") as f:
            json.dump({"results": [1e-3, 1.1e-3, 0.9e-3]}, f)
        files = {}
        for name, text in (
                ("fits.json", '{"results": [1e-3], "x": ' + "[" * 63 + "]" * 63 + "}"),
                ("deep.json", '{"results": [1e-3], "x": ' + "[" * 64 + "]" * 64 + "}"),
                ("deeper.json", "[" * 1000000 + "]" * 1000000),
                ("line.jsonl", '{"id": "a", "results": [1e-3]}\n{"x": ' + "[" * 5000 + "]" * 5000
                 + "}\n"),
                ("long.json", json.dumps({"results": ["\u00e9" * 100]}, ensure_ascii=False))):
            files[name] = os.path.join(d, name)
            with open(files[name], "w", encoding="utf-8") as f:
                f.write(text)
        for name, expected in (("fits.json", None), ("deep.json", "nests deeper than 64 levels"),
                               ("deeper.json", "nests deeper than 64 levels"),
                               ("line.jsonl", "line 2 nests deeper than 64 levels"),
                               ("long.json", "\u00e9" * 59 + "... (102 characters), not")):
            cli = subprocess.run([KPROF, "compare", files[name], good], capture_output=True,
                                 text=True)
            if expected is None:
                assert cli.returncode == 0, cli.stderr
                kprof.compare(files[name], good)
                continue
            with pytest.raises(ValueError) as refused:
                kprof.compare(files[name], good)
            assert expected in str(refused.value)
            assert cli.stderr.strip() == "kprof: INVALID_ARGUMENT: " + str(refused.value)
