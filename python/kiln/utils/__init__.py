"""kiln.utils: data loading (kiln.utils.data)."""
from kiln.utils import data  # noqa: F401
