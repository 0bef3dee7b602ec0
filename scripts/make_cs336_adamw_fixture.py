#!/usr/bin/python3
"""Writes tests/fixtures/cs336_adamw/: the inputs of Stanford CS336's test_adamw (assignment 1),
generated with torch once, so that tests/cs336_adamw_test.cpp can run lab 13's AdamW on them
without torch. Maintainers only (Debian's python3-torch).

    /usr/bin/python3 scripts/make_cs336_adamw_fixture.py [--out tests/fixtures/cs336_adamw]

CS336's test: torch.manual_seed(42); a torch.nn.Linear(3, 2, bias=False); AdamW with lr 1e-3,
weight decay 0.01, betas (0.9, 0.999), eps 1e-8; 1000 steps, each on x = torch.rand(3),
y = (x0 + x1, −x2), loss = Σ (y − W x)². Its snapshot (../shared/peer/cs336-a1/test_adamw.npz,
never copied here) holds the final W. This script replays the test with torch.optim.AdamW and
writes
  w0.npy       (2, 3) float32: the Linear's initial weight
  x.npy        (1000, 3) float32: the inputs, in order
  w_torch.npy  (2, 3) float32: W after the 1000 steps of torch.optim.AdamW in this torch
  meta.json    the settings and the torch version
and, when the snapshot is there, prints how far torch's W is from it (CS336's tolerance: 1e-4)."""
import argparse
import json
import os

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPSHOT = os.path.join(os.path.dirname(REPO), "shared", "peer", "cs336-a1", "test_adamw.npz")
SETTINGS = {"lr": 1e-3, "weight_decay": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "steps": 1000,
            "seed": 42}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "cs336_adamw"))
    args = parser.parse_args()
    torch.manual_seed(SETTINGS["seed"])
    model = torch.nn.Linear(3, 2, bias=False)
    w0 = model.weight.detach().clone()
    opt = torch.optim.AdamW(model.parameters(), lr=SETTINGS["lr"],
                            weight_decay=SETTINGS["weight_decay"],
                            betas=tuple(SETTINGS["betas"]), eps=SETTINGS["eps"])
    xs = []
    for _ in range(SETTINGS["steps"]):
        opt.zero_grad()
        x = torch.rand(model.in_features)
        xs.append(x.clone())
        y = torch.tensor([x[0] + x[1], -x[2]])
        loss = ((y - model(x)) ** 2).sum()
        loss.backward()
        opt.step()
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "w0.npy"), w0.numpy().astype(np.float32))
    np.save(os.path.join(args.out, "x.npy"), torch.stack(xs).numpy().astype(np.float32))
    w = model.weight.detach().numpy().astype(np.float32)
    np.save(os.path.join(args.out, "w_torch.npy"), w)
    with open(os.path.join(args.out, "meta.json"), "w") as meta:
        json.dump({**SETTINGS, "torch": torch.__version__,
                   "generator": "scripts/make_cs336_adamw_fixture.py"}, meta, indent=2)
        meta.write("\n")
    print(f"wrote {args.out}")
    if os.path.exists(SNAPSHOT):
        snapshot = np.load(SNAPSHOT)["array"]
        print(f"torch.optim.AdamW against CS336's snapshot: max |diff| "
              f"{np.abs(w - snapshot).max():.2e} (CS336's tolerance 1e-4)")


if __name__ == "__main__":
    main()
