"""Lab 13 fixtures: the GPT's MLP, one pre-LN block and a small whole model, refereed by PyTorch's
autograd; AdamW with clipping and the schedule, refereed by torch.optim.AdamW; and the inputs of
CS336's test_adamw.

Called by scripts/make_fixtures.py as generate(out_dir). minimodel's layout throughout: rows of
(N, d) matrices are tokens (row b*T + t is token t of sequence b), projections are x @ W + b with
W (in, out). Parameters are stored under the names of gpt.hpp's parameter_tensors, gradients under
"grad." + that name (the MLP's and the block's without the "h0." prefix).

    gpt_mlp        y = gelu_tanh(x W_fc + b_fc) W_proj + b_proj, x (7, 8), d 8, 4d 32
        x, w_fc, b_fc, w_proj, b_proj, d_out (7, 8), y, grad.x, grad.w_fc, grad.b_fc,
        grad.w_proj, grad.b_proj
    gpt_block      one pre-LN block over B 2 sequences of T 5 tokens, d 8, 2 heads, causal:
                   mid = x + attn(ln_1(x)), y = mid + mlp(ln_2(mid))
        x (10, 8), ln_1.gain, ln_1.bias, attn.w_q … attn.b_o, ln_2.gain, ln_2.bias, mlp.w_fc …
        mlp.b_proj, d_out (10, 8), y (10, 8), probs (2, 2, 5, 5), grad.x and grad.<name> of every
        parameter
    gpt_small      a whole GPT: V 11, max_len 8, d 8, 2 heads, 2 layers, tokens and targets (2, 6)
        tokens, targets (2, 6) as float32 (small integers, exact), every parameter by name,
        logits (2, 6, 11), loss (1,) (mean cross-entropy in nats), grad.<name> of every
        parameter (wte's the sum of the embedding's and the unembedding's)
    gpt_adamw      AdamW on three tensors for 6 steps: w (4, 3) decayed (weight_decay 0.1),
                   b (3) and e (5, 2) not; each step's gradient clipped to global norm 1 with
                   torch.nn.utils.clip_grad_norm_, then opt.step() at the schedule's learning rate
                   (lr_max 1e-2, lr_min 1e-3, warmup 2, max_steps 5: two warm-up steps, the cosine,
                   and a step past max_steps); betas (0.9, 0.95), eps 1e-8
        w, b, e (initial), grad.w (6, 4, 3), grad.b (6, 3), grad.e (6, 5, 2) (before clipping),
        lr (6), norm (6) (clip_grad_norm_'s return), after.w (6, 4, 3), after.b (6, 3),
        after.e (6, 5, 2) (after each step), exp_avg.w, exp_avg_sq.w … (after the last step)
    cs336_adamw_inputs  the inputs of CS336 assignment 1's test_adamw, generated with torch:
        weight (2, 3), the initial Linear(3, 2, bias=False) weight after torch.manual_seed(42),
        inputs (1000, 3), the torch.rand(3) of each step in order. Never its expected output: the
        maintainers' test reads that snapshot from ../shared/peer/cs336-a1/test_adamw.npz.

Inputs are drawn in float32 from numpy.random.default_rng(seed) (gpt_adamw's and the models'),
weights scaled by 1/sqrt(fan_in), biases and LayerNorm parameters 0.1-0.5 * N(0, 1) so that every
parameter takes part; the models run in float64 torch on exactly those values, results rounded to
float32. gpt_adamw runs in float32, as training does: it is the optimiser's own arithmetic that is
the referee there.

Checks before anything is written (any failure stops the script):
  * the block's and the small model's forward recomputed in plain NumPy float64 (softmax with a
    -inf causal mask, LayerNorm with the biased variance) agree with torch to
    make_fixtures.NUMPY_TOLERANCE;
  * torch.autograd.gradcheck (float64 central differences against autograd) passes on the MLP,
    the block and the small model's loss as functions of every input and parameter;
  * CS336's loop, run on the stored inputs from the stored weight, reproduces the same final
    weight as the loop drawing its own inputs after torch.manual_seed(42), bit for bit; and, if
    ../shared/peer/cs336-a1/test_adamw.npz is present, that snapshot to 1e-6.
"""

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import make_fixtures
from make_fixtures import max_diff, write_case

LAB = "13"
EPS = 1e-5
CS336_SNAPSHOT = Path(__file__).resolve().parents[3] / "shared" / "peer" / "cs336-a1" / "test_adamw.npz"


def f64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def meta(name, seed, description, **extra):
    return {"case": name, "lab": LAB, "seed": seed, "generator": make_fixtures.GENERATOR,
            "torch": torch.__version__, "numpy": np.__version__, "description": description,
            **extra}


# ---- parameters ---------------------------------------------------------------------------------

def draw_layer(rng, d):
    """One layer's parameters by parameter_tensors' names (without "h{l}."), in that order."""
    n = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    w = lambda i, o: n(i, o) * np.float32(1 / math.sqrt(i))
    p = {}
    p["ln_1.gain"] = np.float32(1) + np.float32(0.1) * n(d)
    p["ln_1.bias"] = np.float32(0.1) * n(d)
    for x in "qkvo":
        p[f"attn.w_{x}"] = w(d, d)
        p[f"attn.b_{x}"] = np.float32(0.5) * n(d)
    p["ln_2.gain"] = np.float32(1) + np.float32(0.1) * n(d)
    p["ln_2.bias"] = np.float32(0.1) * n(d)
    p["mlp.w_fc"] = w(d, 4 * d)
    p["mlp.b_fc"] = np.float32(0.5) * n(4 * d)
    p["mlp.w_proj"] = w(4 * d, d)
    p["mlp.b_proj"] = np.float32(0.5) * n(d)
    return p


# ---- torch forwards (float64) -------------------------------------------------------------------

def t_mlp(x, p, prefix="mlp."):
    h = x @ p[prefix + "w_fc"] + p[prefix + "b_fc"]
    return F.gelu(h, approximate="tanh") @ p[prefix + "w_proj"] + p[prefix + "b_proj"]


def t_block(x, p, B, T, H, prefix=""):
    """x (B*T, d) -> y (B*T, d), probs (B, H, T, T)."""
    d = x.shape[1]
    dh = d // H
    g = lambda name: p[prefix + name]
    ln = F.layer_norm(x, (d,), g("ln_1.gain"), g("ln_1.bias"), eps=EPS)
    split = lambda m: m.reshape(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
    q = split(ln @ g("attn.w_q") + g("attn.b_q"))
    k = split(ln @ g("attn.w_k") + g("attn.b_k"))
    v = split(ln @ g("attn.w_v") + g("attn.b_v"))
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(dh)).masked_fill(causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    merged = (probs @ v).transpose(1, 2).reshape(B * T, d)
    mid = x + merged @ g("attn.w_o") + g("attn.b_o")
    ln2 = F.layer_norm(mid, (d,), g("ln_2.gain"), g("ln_2.bias"), eps=EPS)
    return mid + t_mlp(ln2, p, prefix + "mlp."), probs


def t_gpt(tokens, p, n_layers, H):
    B, T = tokens.shape
    d = p["wte"].shape[1]
    x = (p["wte"][tokens] + p["wpe"][:T]).reshape(B * T, d)
    for l in range(n_layers):
        x, _ = t_block(x, p, B, T, H, prefix=f"h{l}.")
    x = F.layer_norm(x, (d,), p["ln_f.gain"], p["ln_f.bias"], eps=EPS)
    return (x @ p["wte"].T).reshape(B, T, -1)


# ---- NumPy forwards (float64), the independent check -------------------------------------------

def n_layer_norm(x, gain, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * gain + bias


def n_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def n_block(x, p, B, T, H, prefix=""):
    d = x.shape[1]
    dh = d // H
    g = lambda name: np.asarray(p[prefix + name], dtype=np.float64)
    ln = n_layer_norm(x, g("ln_1.gain"), g("ln_1.bias"))
    split = lambda m: m.reshape(B, T, H, dh).transpose(0, 2, 1, 3)
    q, k, v = (split(ln @ g(f"attn.w_{n}") + g(f"attn.b_{n}")) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    scores = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    mid = x + (probs @ v).transpose(0, 2, 1, 3).reshape(B * T, d) @ g("attn.w_o") + g("attn.b_o")
    ln2 = n_layer_norm(mid, g("ln_2.gain"), g("ln_2.bias"))
    h = n_gelu(ln2 @ g("mlp.w_fc") + g("mlp.b_fc"))
    return mid + h @ g("mlp.w_proj") + g("mlp.b_proj"), probs


def n_gpt(tokens, p, n_layers, H):
    B, T = tokens.shape
    wte = np.asarray(p["wte"], dtype=np.float64)
    x = (wte[tokens] + np.asarray(p["wpe"], dtype=np.float64)[:T]).reshape(B * T, -1)
    for l in range(n_layers):
        x, _ = n_block(x, p, B, T, H, prefix=f"h{l}.")
    x = n_layer_norm(x, np.asarray(p["ln_f.gain"], np.float64), np.asarray(p["ln_f.bias"], np.float64))
    return (x @ wte.T).reshape(B, T, -1)


def stop(case, what):
    sys.exit(f"make_fixtures.py: {case}: {what}")


def check_numpy(case, torch_out, numpy_out):
    diff = max_diff(torch_out, numpy_out)
    if diff > make_fixtures.NUMPY_TOLERANCE:
        stop(case, f"torch and NumPy disagree by {diff:.3g}")
    return diff


def gradcheck(case, function, inputs):
    if not torch.autograd.gradcheck(function, inputs, eps=1e-6, atol=1e-7, rtol=1e-6):
        stop(case, "torch.autograd.gradcheck failed")


# ---- the cases ----------------------------------------------------------------------------------

def mlp_case(out_dir):
    name, seed, N, d = "gpt_mlp", 13001, 7, 8
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, d), dtype=np.float32)
    p = {k[4:]: v for k, v in draw_layer(rng, d).items() if k.startswith("mlp.")}
    d_out = rng.standard_normal((N, d), dtype=np.float32)
    tensors = {k: f64(v).requires_grad_() for k, v in p.items()}
    xt = f64(x).requires_grad_()
    y = t_mlp(xt, tensors, "")
    y.backward(f64(d_out))
    h = x.astype(np.float64) @ p["w_fc"] + p["b_fc"]
    diff = check_numpy(name, y.detach().numpy(), n_gelu(h) @ p["w_proj"] + p["b_proj"])
    names = list(p)
    gradcheck(name, lambda xx, *ps: t_mlp(xx, dict(zip(names, ps)), ""),
              (f64(x).requires_grad_(), *(f64(p[n]).requires_grad_() for n in names)))
    arrays = {"x": x, **p, "d_out": d_out, "y": y.detach().numpy(), "grad.x": xt.grad.numpy()}
    arrays.update({f"grad.{k}": t.grad.numpy() for k, t in tensors.items()})
    write_case(out_dir / name, arrays, meta(
        name, seed, "The GPT's MLP on 7 rows of width 8: y = gelu_tanh(x W_fc + b_fc) W_proj + "
        "b_proj, and torch autograd's gradients for the upstream gradient d_out.", d_model=d))
    print(f"{name:24s} lab 13  x (7, 8)  numpy-vs-torch dy {diff:.1e}")


def block_case(out_dir):
    name, seed, B, T, d, H = "gpt_block", 13002, 2, 5, 8, 2
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B * T, d), dtype=np.float32)
    p = draw_layer(rng, d)
    d_out = rng.standard_normal((B * T, d), dtype=np.float32)
    tensors = {k: f64(v).requires_grad_() for k, v in p.items()}
    xt = f64(x).requires_grad_()
    y, probs = t_block(xt, tensors, B, T, H)
    y.backward(f64(d_out))
    y_np, probs_np = n_block(x.astype(np.float64), p, B, T, H)
    diff = max(check_numpy(name, y.detach().numpy(), y_np),
               check_numpy(name, probs.detach().numpy(), probs_np))
    names = list(p)
    gradcheck(name, lambda xx, *ps: t_block(xx, dict(zip(names, ps)), B, T, H)[0],
              (f64(x).requires_grad_(), *(f64(p[n]).requires_grad_() for n in names)))
    arrays = {"x": x, **p, "d_out": d_out, "y": y.detach().numpy(),
              "probs": probs.detach().numpy(), "grad.x": xt.grad.numpy()}
    arrays.update({f"grad.{k}": t.grad.numpy() for k, t in tensors.items()})
    write_case(out_dir / name, arrays, meta(
        name, seed, "One pre-LN GPT block on 2 sequences of 5 tokens (rows b*5 + t), d_model 8, "
        "2 heads, causal, LayerNorm eps 1e-5 with gains and biases, attention and MLP with "
        "biases; torch autograd's gradients of every parameter and of x for d_out.",
        batch=B, length=T, d_model=d, n_heads=H))
    print(f"{name:24s} lab 13  x (10, 8) H 2  numpy-vs-torch {diff:.1e}")


def small_case(out_dir):
    name, seed = "gpt_small", 13003
    V, max_len, d, H, L, B, T = 11, 8, 8, 2, 2, 2, 6
    rng = np.random.default_rng(seed)
    p = {"wte": rng.standard_normal((V, d), dtype=np.float32),
         "wpe": np.float32(0.5) * rng.standard_normal((max_len, d), dtype=np.float32)}
    for l in range(L):
        p.update({f"h{l}.{k}": v for k, v in draw_layer(rng, d).items()})
    p["ln_f.gain"] = np.float32(1) + np.float32(0.1) * rng.standard_normal(d, dtype=np.float32)
    p["ln_f.bias"] = np.float32(0.1) * rng.standard_normal(d, dtype=np.float32)
    # tokens 9 and 10 never appear as inputs: their wte rows get the unembedding's gradient only
    tokens = rng.integers(0, 9, size=(B, T))
    targets = rng.integers(0, V, size=(B, T))
    tensors = {k: f64(v).requires_grad_() for k, v in p.items()}
    logits = t_gpt(torch.from_numpy(tokens), tensors, L, H)
    loss = F.cross_entropy(logits.reshape(B * T, V), torch.from_numpy(targets).reshape(-1))
    loss.backward()
    diff = check_numpy(name, logits.detach().numpy(), n_gpt(tokens, p, L, H))
    names = list(p)
    tt, tg = torch.from_numpy(tokens), torch.from_numpy(targets).reshape(-1)
    gradcheck(name, lambda *ps: F.cross_entropy(
        t_gpt(tt, dict(zip(names, ps)), L, H).reshape(B * T, V), tg),
        tuple(f64(p[n]).requires_grad_() for n in names))
    arrays = {"tokens": tokens.astype(np.float32), "targets": targets.astype(np.float32), **p,
              "logits": logits.detach().numpy(), "loss": np.array([loss.item()])}
    arrays.update({f"grad.{k}": t.grad.numpy() for k, t in tensors.items()})
    write_case(out_dir / name, arrays, meta(
        name, seed, "A whole GPT: V 11, max_len 8, d_model 8, 2 heads, 2 layers, on 2 sequences "
        "of 6 tokens (ids 0-8: tokens 9 and 10 are only targets); logits, the mean "
        "cross-entropy and torch autograd's gradient of every parameter, wte's summing the "
        "embedding's and the tied unembedding's.",
        vocab=V, max_len=max_len, d_model=d, n_heads=H, n_layers=L))
    print(f"{name:24s} lab 13  V {V} d {d} L {L}  loss {loss.item():.4f}  numpy-vs-torch {diff:.1e}")


def get_lr(step, lr_max, lr_min, warmup, max_steps):
    """nanoGPT's get_lr, as lab 13's learning_rate."""
    if step < warmup:
        return lr_max * (step + 1) / warmup
    if step > max_steps:
        return lr_min
    ratio = (step - warmup) / (max_steps - warmup)
    return lr_min + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr_max - lr_min)


def adamw_case(out_dir):
    name, seed, steps = "gpt_adamw", 13004, 6
    schedule = dict(lr_max=1e-2, lr_min=1e-3, warmup=2, max_steps=5)
    rng = np.random.default_rng(seed)
    shapes = {"w": (4, 3), "b": (3,), "e": (5, 2)}
    initial = {k: rng.standard_normal(s, dtype=np.float32) for k, s in shapes.items()}
    # gradient scales per step: steps 0, 2 and 4 are clipped (norm > 1), the others not
    scales = [3.0, 0.05, 2.0, 0.1, 5.0, 0.02]
    grads = {k: np.stack([np.float32(scales[t]) * rng.standard_normal(s, dtype=np.float32)
                          for t in range(steps)]) for k, s in shapes.items()}
    params = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in initial.items()}
    opt = torch.optim.AdamW([{"params": [params["w"]], "weight_decay": 0.1},
                             {"params": [params["b"], params["e"]], "weight_decay": 0.0}],
                            lr=schedule["lr_max"], betas=(0.9, 0.95), eps=1e-8)
    lrs, norms, after = [], [], {k: [] for k in shapes}
    clipped = 0
    for t in range(steps):
        for k in shapes:
            params[k].grad = torch.from_numpy(grads[k][t].copy())
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        clipped += norm.item() > 1.0
        lr = get_lr(t, **schedule)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        lrs.append(lr)
        norms.append(norm.item())
        for k in shapes:
            after[k].append(params[k].detach().numpy().copy())
    if clipped != 3:
        stop(name, f"{clipped} of the steps were clipped, not 3")
    arrays = dict(initial)
    arrays.update({f"grad.{k}": v for k, v in grads.items()})
    arrays.update({"lr": np.array(lrs), "norm": np.array(norms)})
    arrays.update({f"after.{k}": np.stack(v) for k, v in after.items()})
    for k in shapes:
        state = opt.state[params[k]]
        arrays[f"exp_avg.{k}"] = state["exp_avg"].numpy()
        arrays[f"exp_avg_sq.{k}"] = state["exp_avg_sq"].numpy()
    write_case(out_dir / name, arrays, meta(
        name, seed, "torch.optim.AdamW (float32, betas (0.9, 0.95), eps 1e-8) on w (decayed, "
        "weight_decay 0.1), b and e (not decayed) for 6 steps, each gradient clipped to global "
        "norm 1 by clip_grad_norm_ (steps 0, 2, 4 clipped) and the step run at nanoGPT's "
        "schedule (lr_max 1e-2, lr_min 1e-3, warmup 2, max_steps 5).",
        steps=steps, max_norm=1.0, betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1,
        decayed=["w"], **schedule))
    print(f"{name:24s} lab 13  3 tensors, {steps} steps, norms "
          + " ".join(f"{n:.3g}" for n in norms))


def cs336_loop(weight, inputs=None):
    """CS336 assignment 1's test_adamw loop from `weight`, drawing its inputs with torch.rand
    unless given (the model is a bare parameter: making a Linear here would draw from the
    generator); returns the final weight and the inputs used."""
    w = torch.nn.Parameter(weight.clone())
    opt = torch.optim.AdamW([w], lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8)
    used = []
    for i in range(1000):
        opt.zero_grad()
        x = torch.rand(3) if inputs is None else inputs[i]
        used.append(x.clone())
        y_hat = F.linear(x, w)  # what Linear(3, 2, bias=False) computes
        y = torch.tensor([x[0] + x[1], -x[2]])
        loss = ((y - y_hat) ** 2).sum()
        loss.backward()
        opt.step()
    return w.detach().clone(), torch.stack(used)


def cs336_case(out_dir):
    name = "cs336_adamw_inputs"
    torch.manual_seed(42)
    model = torch.nn.Linear(3, 2, bias=False)
    weight = model.weight.detach().clone()
    final, inputs = cs336_loop(weight)  # draws right after the model, as the test does
    replay, _ = cs336_loop(weight, inputs)
    if not torch.equal(final, replay):
        stop(name, "the loop on the stored inputs does not reproduce the drawn one")
    snapshot = "absent"
    if CS336_SNAPSHOT.exists():
        expected = np.load(CS336_SNAPSHOT)["array"]
        # The snapshot is CS336's own AdamW (the handout's algorithm: the decay after the
        # update, eps outside the bias correction), not torch's: their test accepts either to
        # 1e-4, and torch lands about 5e-6 away.
        diff = float(np.max(np.abs(final.numpy() - expected)))
        if diff > 1e-4:
            stop(name, f"torch's loop differs from CS336's snapshot by {diff:.3g} > 1e-4")
        snapshot = f"torch's AdamW within {diff:.1e} of it"
    write_case(out_dir / name, {"weight": weight.numpy(), "inputs": inputs.numpy()}, meta(
        name, 42, "The inputs of CS336 assignment 1's test_adamw, generated with torch: the "
        "initial weight of Linear(3, 2, bias=False) after torch.manual_seed(42) and the 1000 "
        "torch.rand(3) drawn after it, one per step. The expected final weight is CS336's "
        "snapshot, read at run time from ../shared/peer/cs336-a1/test_adamw.npz, never stored "
        "here.", lr=1e-3, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-8, steps=1000))
    print(f"{name:24s} lab 13  weight (2, 3), inputs (1000, 3); CS336 snapshot {snapshot}")


def generate(out_dir):
    out_dir = Path(out_dir)
    mlp_case(out_dir)
    block_case(out_dir)
    small_case(out_dir)
    adamw_case(out_dir)
    cs336_case(out_dir)
