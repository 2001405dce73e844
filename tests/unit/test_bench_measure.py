"""bench.measure.median_of: what a repeated subject's kept measurement is."""

import pytest

from bench.measure import Measurement, median_of


def run(seconds, python_peak, jvm_peak, findings=29):
    return Measurement("james_audit", "ours", "ours", "1 entries", seconds, python_peak, jvm_peak,
                       {"findings": findings}, "python -m x")  # fmt: skip


def test_median_seconds_highest_peaks_and_every_run_kept():
    kept = median_of([run(47.6, 100, None), run(44.8, 300, 2000), run(46.1, 200, 3000)])
    assert kept.seconds == 46.1
    assert (kept.python_peak_rss, kept.jvm_peak_rss) == (300, 3000)
    assert kept.output == {"findings": 29, "seconds_each": [47.6, 44.8, 46.1]}


def test_even_runs_average_the_middle_two_and_one_run_is_itself():
    assert median_of([run(4.0, 1, None), run(2.0, 1, None)]).seconds == 3.0
    single = median_of([run(5.0, 7, 9)])
    assert (single.seconds, single.output) == (5.0, {"findings": 29})
    assert single.jvm_peak_rss == 9


def test_no_runs_is_an_error():
    with pytest.raises(ValueError):
        median_of([])
