"""Shared fixtures: inca-switchd on loopback (cais.launch.Switch) and rank runners."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

import cais.launch as launch  # noqa: E402  (PYTHONPATH=build/release/python)


@pytest.fixture
def switch():
    s = launch.Switch()
    yield s
    s.stop()


def run(scenario, n, env, timeout_s=120):
    return launch.run_ranks([os.path.join(HERE, "rank_worker.py"), scenario], n, env=env,
                            timeout_s=timeout_s)
