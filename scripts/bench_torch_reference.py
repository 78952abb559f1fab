"""Reference timing: the same 5,000-step Gaussian-MLP training in PyTorch eager on CPU.

Not part of the package and never imported by tests. Run it in an environment with torch, e.g.

    python3.11 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchenv/bin/python scripts/bench_torch_reference.py [--steps 5000] [--threads 2]

It trains a 4x200 ReLU MLP with a mean head and a bounded log-variance head (Gaussian NLL, Adam,
lr 1e-3, minibatches of 64 drawn with replacement) on an Ant-sized synthetic problem (35 inputs,
27 targets; the same generator as ``bench.ant_sized_problem``, repeated here so the script
needs only numpy and torch) and prints JSON with ``torch_train_s``.
"""

import argparse
import json
import time

import numpy as np
import torch
from torch import nn


def ant_sized_problem(seed, n_rows=60_000):
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(27, 27)) / np.sqrt(27)
    s = rng.normal(size=(n_rows, 27)) @ mix
    a = rng.uniform(-1.0, 1.0, size=(n_rows, 8))
    x = np.concatenate([s, a], axis=1)
    w1 = rng.normal(size=(x.shape[1], 64)) / np.sqrt(x.shape[1])
    w2 = rng.normal(size=(64, 27)) / 8.0
    noise = 0.02 + 0.05 * np.abs(np.tanh(s[:, :1]))
    y = np.tanh(x @ w1) @ w2 + noise * rng.normal(size=(n_rows, 27))
    return x.astype(np.float32), y.astype(np.float32)


class GaussianMLP(nn.Module):
    def __init__(
        self, in_dim, out_dim, hidden=(200, 200, 200, 200), min_logvar=-10.0, max_logvar=4.0
    ):
        super().__init__()
        layers, d = [], in_dim
        for width in hidden:
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(d, 2 * out_dim)
        self.out_dim, self.min_logvar, self.max_logvar = out_dim, min_logvar, max_logvar

    def forward(self, x):
        out = self.head(self.body(x))
        mean, raw = out[:, : self.out_dim], out[:, self.out_dim :]
        logvar = self.max_logvar - nn.functional.softplus(self.max_logvar - raw)
        logvar = self.min_logvar + nn.functional.softplus(logvar - self.min_logvar)
        return mean, logvar


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = ant_sized_problem(0, n_rows=50_000)
    x = (x - x.mean(0)) / x.std(0)
    y = (y - y.mean(0)) / y.std(0)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    model = GaussianMLP(x.shape[1], y.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for _ in range(args.steps):
        idx = torch.randint(0, x.shape[0], (args.batch_size,), generator=gen)
        mean, logvar = model(x[idx])
        loss = 0.5 * (logvar + (y[idx] - mean) ** 2 * torch.exp(-logvar)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    print(
        json.dumps(
            {
                "torch_train_s": elapsed,
                "steps": args.steps,
                "threads": args.threads,
                "final_loss": float(loss.detach()),
                "torch": torch.__version__,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
