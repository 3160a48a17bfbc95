"""Shared test configuration.

With NPOPTIM_REQUIRE_TORCH=1 (set by .ci/run) torch must import: the cross-checks against
torch.optim are the core of the test suite, and CI must not pass with them skipped.
"""
import os

import pytest


def pytest_sessionstart(session):
    if os.environ.get("NPOPTIM_REQUIRE_TORCH") == "1":
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(f"NPOPTIM_REQUIRE_TORCH=1 but torch is missing: {exc}")
