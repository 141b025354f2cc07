"""What several test modules share, importable as ``helpers`` from every folder of tests/
(pytest puts tests/, the folder of the rootdir's conftest.py, on sys.path): headless
Chromium (browser), an independent reading of Kineto traces (naive), and the suites,
traces and stand-ins the tests of more than one stage build on, and what the run makes once
for every module that reads it (once)."""
