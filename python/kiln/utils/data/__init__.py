"""kiln.utils.data: Dataset, TensorDataset and DataLoader, as in
torch.utils.data (map-style datasets, one process)."""
from kiln._missing import module_getattr
from kiln.utils.data.dataloader import DataLoader, default_collate
from kiln.utils.data.dataset import Dataset, Subset, TensorDataset, random_split

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader",
           "default_collate"]

__getattr__ = module_getattr("kiln.utils.data", "torch.utils.data")
