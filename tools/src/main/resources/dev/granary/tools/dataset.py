#!/usr/bin/env python3
"""Sample training datasets in MLPerf Storage shapes, written and read through a Granary mount.

  dataset.py generate --root DIR [--scale S] [--writers 8]
                                               write unet3d-like .npz volumes and resnet50-like
                                               ~110 KiB records with 8 writer threads, plus
                                               manifest.json (sha256 of each)
  dataset.py read --root DIR [--workers 4]     read every sample with a PyTorch DataLoader,
                                               verify every checksum against the manifest, and
                                               print samples/s and MiB/s per shape

The last line printed by each command is 'GRANARY_RESULT <json>' for scripts to parse.
Exit status 0 only when every file matched its checksum.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import time
import warnings

import numpy as np

# A 2-core machine gets a warning for num_workers=4; the workers are what we want to exercise.
warnings.filterwarnings("ignore", message="This DataLoader will create")

MIB = 1024 * 1024
# unet3d-like: 3-D float32 image volume plus uint8 label mask, ~28 MiB per .npz at scale 1.
UNET3D_FILES = 8
UNET3D_SHAPE = (192, 192, 160)
# resnet50-like: ~110 KiB records (the size of an ImageNet JPEG record in MLPerf Storage).
RESNET_FILES = 2000
RESNET_BYTES = 110 * 1024


def result(obj):
    print("GRANARY_RESULT " + json.dumps(obj, sort_keys=True), flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def _unet3d_sample(root, i, shape, seed):
    rng = np.random.default_rng([seed, 1, i])
    x = rng.standard_normal(shape, dtype=np.float32)
    y = (x > 0.5).astype(np.uint8)
    buf = io.BytesIO()
    np.savez(buf, x=x, y=y)
    data = buf.getvalue()
    rel = f"unet3d/sample_{i:04d}.npz"
    with open(os.path.join(root, rel), "wb") as f:
        f.write(data)
    return rel, {"sha256": sha256_bytes(data), "size": len(data), "shape": "unet3d"}


def _resnet_record(root, i, seed):
    data = np.random.default_rng([seed, 2, i]).integers(0, 256, RESNET_BYTES, dtype=np.uint8).tobytes()
    rel = f"resnet50/rec_{i:05d}.bin"
    with open(os.path.join(root, rel), "wb") as f:
        f.write(data)
    return rel, {"sha256": sha256_bytes(data), "size": len(data), "shape": "resnet50"}


def generate(root, scale, seed, writers):
    """Writes the dataset with `writers` threads (as data-prep jobs do); content depends only on seed."""
    from concurrent.futures import ThreadPoolExecutor

    manifest_path = os.path.join(root, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        print(f"dataset already present at {root} ({len(manifest['files'])} files); not rewritten")
        result({"op": "generate", "files": len(manifest["files"]), "bytes": manifest["bytes"], "skipped": True})
        return 0
    t0 = time.perf_counter()
    n_unet = max(1, int(round(UNET3D_FILES * scale)))
    shape = tuple(max(8, int(d * min(1.0, scale ** (1 / 3)))) for d in UNET3D_SHAPE)
    n_res = max(1, int(round(RESNET_FILES * scale)))
    os.makedirs(os.path.join(root, "unet3d"), exist_ok=True)
    os.makedirs(os.path.join(root, "resnet50"), exist_ok=True)
    with ThreadPoolExecutor(max_workers=writers) as pool:
        jobs = [pool.submit(_unet3d_sample, root, i, shape, seed) for i in range(n_unet)]
        jobs += [pool.submit(_resnet_record, root, i, seed) for i in range(n_res)]
        files = dict(j.result() for j in jobs)
    total = sum(v["size"] for v in files.values())
    manifest = {"files": files, "bytes": total, "unet3d_shape": list(shape)}
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f)
    os.rename(tmp, manifest_path)
    dt = time.perf_counter() - t0
    print(f"wrote {len(files)} files, {total / MIB:.1f} MiB in {dt:.2f} s ({total / MIB / dt:.1f} MiB/s, {writers} writer threads)")
    result({"op": "generate", "files": len(files), "bytes": total, "seconds": dt, "skipped": False, "writers": writers})
    return 0


def read(root, workers, passes):
    import torch
    from torch.utils.data import DataLoader, Dataset

    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)

    class Samples(Dataset):
        def __init__(self, names):
            self.names = names

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            rel = self.names[i]
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            if rel.endswith(".npz"):
                with np.load(io.BytesIO(data)) as z:
                    assert z["x"].ndim == 3 and z["x"].shape == z["y"].shape, rel
                    voxels = int(z["x"].size)
            else:
                voxels = 0
            return rel, sha256_bytes(data), len(data), voxels

    figures = {}
    bad = []
    for shape, batch in (("unet3d", 1), ("resnet50", 32)):
        names = sorted(k for k, v in manifest["files"].items() if v["shape"] == shape)
        loader = DataLoader(Samples(names), batch_size=batch, num_workers=workers,
                            collate_fn=lambda b: b, shuffle=True, persistent_workers=False)
        for p in range(passes):
            n = 0
            nbytes = 0
            t0 = time.perf_counter()
            for items in loader:
                for rel, digest, size, _ in items:
                    n += 1
                    nbytes += size
                    if digest != manifest["files"][rel]["sha256"]:
                        bad.append(rel)
            dt = time.perf_counter() - t0
            key = shape if passes == 1 else f"{shape}_pass{p + 1}"
            figures[key] = {"samples": n, "bytes": nbytes, "seconds": dt,
                            "samples_per_s": n / dt, "mib_per_s": nbytes / MIB / dt}
            print(f"{key:>16}: {n} samples, {nbytes / MIB:.1f} MiB in {dt:.2f} s: "
                  f"{n / dt:,.0f} samples/s, {nbytes / MIB / dt:,.1f} MiB/s (DataLoader, {workers} workers)")
        if len(names) != sum(1 for k in manifest["files"] if manifest["files"][k]["shape"] == shape):
            bad.append(shape + ": sample count")
    ok = not bad
    print("checksums: all %d files verified" % len(manifest["files"]) if ok
          else "checksums: MISMATCH in %d files: %s" % (len(bad), ", ".join(bad[:5])))
    result({"op": "read", "ok": ok, "files": len(manifest["files"]), "figures": figures, "bad": bad[:20]})
    return 0 if ok else 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["generate", "read"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--writers", type=int, default=8, help="threads writing the dataset (generate)")
    a = ap.parse_args()
    if a.command == "generate":
        return generate(a.root, a.scale, a.seed, a.writers)
    return read(a.root, a.workers, a.passes)


if __name__ == "__main__":
    sys.exit(main())
