"""The Python tests import the op test table (tests/oracle) as well as the
installed kiln package; kiln is never imported from the source tree."""
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle"))

import kiln  # noqa: E402

# The engine's fallback to the caller when its workers wait for busy cores
# (kiln.set_engine_busy_fallback) depends on the machine's load; the tests
# of queueing turn it off so that they check the same thing on a busy
# machine, and test_engine_scheduling.py forces it where it tests it.
kiln.set_engine_busy_fallback(False)

# Likewise the OpenMP team's fallback to one thread while its cores are
# busy (kiln.set_team_busy_fallback): test_team_busy.py turns it on. The
# environment variable keeps it off in the programs tests start too (the
# kiln tool, C++ examples), whose results are compared bit for bit.
os.environ["KILN_TEAM_BUSY_FALLBACK"] = "0"
kiln.set_team_busy_fallback(False)
