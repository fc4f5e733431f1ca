"""kiln.utils.data: Dataset, TensorDataset, DataLoader and DistributedSampler,
as in torch.utils.data (map-style datasets, loaded in one process)."""
from kiln._missing import module_getattr
from kiln.utils.data.dataloader import DataLoader, default_collate
from kiln.utils.data.dataset import Dataset, Subset, TensorDataset, random_split
from kiln.utils.data.distributed import DistributedSampler

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader",
           "default_collate", "DistributedSampler"]

__getattr__ = module_getattr("kiln.utils.data", "torch.utils.data")
