"""Shared fixtures of the gravac.torch tests. Every rank of a gravacrun job runs the same test
file, so the collectives of each test line up across ranks (pytest runs tests in file order)."""

import pytest

import gravac.torch as hvd


@pytest.fixture(scope="session", autouse=True)
def gravac_job():
    hvd.init()
    yield hvd
    hvd.shutdown()
