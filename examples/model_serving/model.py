"""The served model: a two-layer perceptron whose weights are generated from a seed (nothing
downloaded), and its forward pass in plain Python (no numpy: any `python3` runs it).

Both sides use this module: the server answers with `forward` on weights rounded to its
precision setting, the benchmark checks each answer against `forward` on the exact weights.
"""

import math
import random

INPUTS = 32
HIDDEN = 128
OUTPUTS = 8
SEED = 20261206
#: The precisions the server may serve at: bits per weight (None: the exact float weights).
PRECISIONS = {"f64": None, "q8": 8, "q4": 4}


def generate(seed=SEED):
    """The weights: two dense layers, scaled so that the outputs are of order one."""
    rng = random.Random(seed)
    w1 = [[rng.gauss(0.0, 1.0 / math.sqrt(INPUTS)) for _ in range(INPUTS)] for _ in range(HIDDEN)]
    w2 = [[rng.gauss(0.0, 1.0 / math.sqrt(HIDDEN)) for _ in range(HIDDEN)] for _ in range(OUTPUTS)]
    return {"w1": w1, "b1": [0.01] * HIDDEN, "w2": w2, "b2": [0.0] * OUTPUTS}


def quantize(weights, precision):
    """The weights rounded to `precision` (symmetric, one scale per matrix), as a server that
    stores them in fewer bits computes with them."""
    bits = PRECISIONS[precision]
    if bits is None:
        return weights
    levels = 2 ** (bits - 1) - 1
    rounded = dict(weights)
    for name in ("w1", "w2"):
        scale = max(abs(w) for row in weights[name] for w in row) / levels
        rounded[name] = [[round(w / scale) * scale for w in row] for row in weights[name]]
    return rounded


def forward(weights, x):
    """One input vector (INPUTS floats) to its OUTPUTS logits: ReLU(W1 x + b1), then W2 h + b2."""
    hidden = [
        max(0.0, sum(w * v for w, v in zip(row, x, strict=True)) + b)
        for row, b in zip(weights["w1"], weights["b1"], strict=True)
    ]
    return [
        sum(w * h for w, h in zip(row, hidden, strict=True)) + b
        for row, b in zip(weights["w2"], weights["b2"], strict=True)
    ]
