"""kiln.nn.parallel: DistributedDataParallel, data-parallel training over
kiln.distributed's process group, as torch.nn.parallel."""
from kiln._missing import module_getattr
from kiln.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]

__getattr__ = module_getattr("kiln.nn.parallel", "torch.nn.parallel")
