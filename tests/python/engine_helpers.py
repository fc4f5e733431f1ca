"""What the engine tests share: the engine's settings as the session began,
and a fixture that puts them back after each test."""

import pytest

import kiln

DEFAULT_LIMITS = kiln.engine_limits()


@pytest.fixture(autouse=True)
def restore_sync_mode():
    """After each test: its queued work done (a failure it left is the
    test's own, already checked), sync mode, one worker, default limits."""
    yield
    try:
        kiln.synchronize()
    except Exception:
        pass
    kiln.set_execution("sync")
    kiln.set_num_interop_threads(1)
    kiln.set_engine_limits(*DEFAULT_LIMITS)
