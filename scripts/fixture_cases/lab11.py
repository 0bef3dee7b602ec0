"""Lab 11 fixture: PyTorch's float32 -> float16 and float32 -> bfloat16 conversions.

One case folder, half_conversions, holds

    x.npy       (N,) float32: the inputs
    fp16.npy    (N,) float32: torch.from_numpy(x).to(torch.float16).to(torch.float32)
    bf16.npy    (N,) float32: the same through torch.bfloat16
    meta.json   as make_fixtures.py's, plus the count of each kind of input

The inputs are the ones a conversion gets wrong: for a sample of values of each format, the
float32 exactly halfway to the next value (a tie, which goes to the even neighbour) and the floats
one float32 ulp either side of it; the largest finite values and the overflow thresholds (65520 in
fp16); fp16 subnormals and the values around half the smallest one; zeros, infinities and NaNs;
and floats spread log-uniformly over fp16's and bf16's ranges. Every value round-trips exactly
(float16 and bfloat16 values are float32 values), so the test compares bit for bit, with any NaN
matching any NaN.
"""

import numpy as np
import torch

import make_fixtures

LAB = "11"
NAME, SEED = "half_conversions", 1110
SAMPLED_VALUES = 600  # per format; each gives a tie and its two float32 neighbours


def as_float(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def ties_and_neighbours(values, step):
    """For float32 values of a format and their step to the next value: the midpoint (exact in
    float32, a tie) and the floats one ulp below and above it."""
    tie = (values.astype(np.float64) + step / 2).astype(np.float32)
    below = np.nextafter(tie, np.float32(-np.inf))
    above = np.nextafter(tie, np.float32(np.inf))
    return np.concatenate([tie, below, above])


def inputs(rng):
    # fp16 normals: patterns 0x0400..0x7BFE (exponent 1..30), so the next value is finite.
    fp16_bits = rng.integers(0x0400, 0x7BFF, SAMPLED_VALUES, dtype=np.uint16)
    fp16_values = fp16_bits.view(np.float16).astype(np.float32)
    fp16_step = np.spacing(fp16_bits.view(np.float16)).astype(np.float64)
    # fp16 subnormals: steps of 2^-24.
    sub = rng.integers(1, 0x03FF, 100).astype(np.float64) * 2.0**-24
    # bf16 normals: float32 whose lower 16 bits are zero, exponent 1..253.
    bf16_bits = (rng.integers(0x0080, 0x7F00, SAMPLED_VALUES, dtype=np.uint32) << 16)
    bf16_values = as_float(bf16_bits)
    bf16_step = np.ldexp(1.0, np.frexp(bf16_values.astype(np.float64))[1] - 8)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.1, 65504.0,
                         65519.99609375, 65520.0, 65536.0, 1e9, -1e9, 2.0**-14, 2.0**-24,
                         2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 256.0, 257.0, 259.0, 4097.0,
                         3.3895313892515355e38, 3.3961775292304e38, 3.4028234663852886e38],
                        dtype=np.float32)
    spread = np.exp(rng.uniform(np.log(2.0**-30), np.log(2.0**20), 2000))
    spread *= rng.choice([-1.0, 1.0], spread.size)
    signs = lambda a: np.concatenate([a, -a])
    parts = {
        "fp16 ties and neighbours": signs(ties_and_neighbours(fp16_values, fp16_step)),
        "fp16 subnormal ties and neighbours": signs(ties_and_neighbours(
            sub.astype(np.float32), np.full(sub.size, 2.0**-24))),
        "bf16 ties and neighbours": signs(ties_and_neighbours(bf16_values, bf16_step)),
        "special values": specials,
        "log-uniform over 2^-30 to 2^20": spread.astype(np.float32),
    }
    return parts


def generate(out_dir):
    rng = np.random.default_rng(SEED)
    parts = inputs(rng)
    x = np.concatenate([p.astype(np.float32) for p in parts.values()])
    t = torch.from_numpy(x)
    fp16 = t.to(torch.float16).to(torch.float32).numpy()
    bf16 = t.to(torch.bfloat16).to(torch.float32).numpy()
    # The sample must contain what it claims: ties that go down and up, overflow, subnormals.
    assert np.sum(np.isinf(fp16) & np.isfinite(x)) > 0, "no fp16 overflow in the sample"
    assert np.sum((fp16 != 0) & (np.abs(fp16) < 2.0**-14)) > 0, "no fp16 subnormals"
    meta = {"case": NAME, "lab": LAB, "seed": SEED,
            "inputs": {name: int(p.size) for name, p in parts.items()},
            "generator": make_fixtures.GENERATOR, "torch": torch.__version__,
            "numpy": np.__version__,
            "description": "float32 values converted by torch to float16 and bfloat16 and back: "
                           "ties, their neighbours, overflow, subnormals and special values."}
    make_fixtures.write_case(out_dir / NAME, {"x": x, "fp16": fp16, "bf16": bf16}, meta)
    print(f"{NAME:24s} lab {LAB}  {x.size} floats  fp16 inf {int(np.isinf(fp16).sum())}  "
          f"bf16 inf {int(np.isinf(bf16).sum())}  NaN {int(np.isnan(x).sum())}")
