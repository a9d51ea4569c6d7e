"""The harness of the Python test suites (dev/test_ablate.py, dev/test_eval_scripts.py,
dev/test_hf.py, data/test_data.py): a suite registers its tests with @suite.test, a test
fails by raising (check() raises AssertionError) and skips by raising Skip(reason), and
suite.run() prints one PASS/FAIL/SKIP line per test (a string a test returns is added to
its PASS line) and ends with "N passed, N failed, N skipped", as make test reads it.
"""
import io
import os
import time
import traceback
from contextlib import redirect_stdout


class Skip(Exception):
    """A test that cannot run here: its reason is printed on its SKIP line."""


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


class Suite:
    def __init__(self):
        self.tests = []

    def test(self, fn):
        """Decorator: fn is one of the suite's tests, run in the order they are defined."""
        self.tests.append(fn)
        return fn

    def run(self, names=(), quiet=False, timed=False, skip_all=None, on_fail=None):
        """Runs the tests whose names contain one of names (all when empty) and returns the exit
        status (1 when one failed). quiet: a test's own prints are dropped; timed: each line and
        the summary give seconds; skip_all: a reason that skips every test; on_fail: called
        after a failure's line. A traceback is printed for an error other than a failed check,
        and for every failure with VERBOSE=1 in the environment."""
        counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        t_all = time.time()
        for fn in self.tests:
            if names and not any(n in fn.__name__ for n in names):
                continue
            t0 = time.time()
            trace = ""
            try:
                if skip_all:
                    raise Skip(skip_all)
                if quiet:
                    with redirect_stdout(io.StringIO()):
                        note = fn()
                else:
                    note = fn()
                status, why = "PASS", note or ""
            except Skip as e:
                status, why = "SKIP", str(e)
            except Exception as e:  # noqa: BLE001 (every error is the test's failure)
                status, why = "FAIL", "%s: %s" % (type(e).__name__, e)
                if not isinstance(e, AssertionError) or os.environ.get("VERBOSE"):
                    trace = "\n" + traceback.format_exc().rstrip()
            counts[status] += 1
            secs = " (%.1f s)" % (time.time() - t0) if timed and status != "SKIP" else ""
            print("%s: %s%s%s%s" % (status, fn.__name__, secs, ": " + why if why else "", trace), flush=True)
            if status == "FAIL" and on_fail:
                on_fail()
        print("%d passed, %d failed, %d skipped%s" % (counts["PASS"], counts["FAIL"], counts["SKIP"],
                                                     " (%.0f s)" % (time.time() - t_all) if timed else ""), flush=True)
        return 1 if counts["FAIL"] else 0

