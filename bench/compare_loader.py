#!/usr/bin/env python3
"""One epoch of a PyTorch DataLoader over a folder of equal-size files (used by compare.py).

  compare_loader.py ROOT [--workers 4] [--batch 32]

Each sample is one whole file read with open()/read() and returned as a uint8 tensor; the
DataLoader shuffles, batches and collates as a training job would. Prints one JSON line:
{"samples": N, "bytes": B, "seconds": S, "samples_per_s": ..., "torch": VERSION}.
"""
import argparse
import json
import os
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset

# A 2-core machine gets a warning for num_workers=4; the workers are what we want to exercise.
warnings.filterwarnings("ignore", message="This DataLoader will create")


class FileSamples(Dataset):
    """Every regular file of a folder is one sample: its bytes as a uint8 tensor."""

    def __init__(self, root):
        self.paths = sorted(os.path.join(root, n) for n in os.listdir(root))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    start = time.perf_counter()
    ds = FileSamples(a.root)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    samples = nbytes = 0
    for batch in loader:
        samples += batch.shape[0]
        nbytes += batch.numel()
    secs = time.perf_counter() - start
    print(json.dumps({"samples": samples, "bytes": nbytes, "seconds": secs,
                      "samples_per_s": samples / secs, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
