"""kiln.vision: the operators of torchvision.ops that kiln has (kiln.vision.ops)."""
from kiln.vision import ops

__all__ = ["ops"]
