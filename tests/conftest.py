"""Shared test configuration: pytester drives pytest runs of small test suites."""

pytest_plugins = ["pytester"]
