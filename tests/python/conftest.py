"""The Python tests import the op test table (tests/oracle) as well as the
installed kiln package; kiln is never imported from the source tree."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle"))
