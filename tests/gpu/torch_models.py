"""The four workloads written in plain PyTorch (eager), one training step each with ``torch.optim``.

``torch_step(workload, device)`` returns a function that runs one step (forward, ``backward``, SGD or Adam) on
``device`` and gives the loss as a float (``.item()`` waits for the GPU). TF32 is switched off for products and
cuDNN convolutions, so PyTorch computes in full float32 as gradgen does.
"""
from __future__ import annotations

from typing import Callable

from .workloads import RNN, TRANSFORMER, Workload

__all__ = ["torch_step"]


def _losses(torch, F):
    """Workload name -> ``loss(params, running, x, y)`` (batch norm updates ``running`` in place)."""
    def lenet(p, running, x, y):
        h = F.max_pool2d(F.relu(F.conv2d(x, p["c1.w"], p["c1.b"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2.w"], p["c2.b"])), 2).reshape(x.shape[0], 256)
        h = F.relu(h @ p["f1.w"] + p["f1.b"])
        h = F.relu(h @ p["f2.w"] + p["f2.b"])
        return F.cross_entropy(h @ p["f3.w"] + p["f3.b"], y)

    def resnet(p, running, x, y):
        def conv_bn(h, k):
            h = F.conv2d(h, p[f"conv{k}.w"], padding=1)
            return F.batch_norm(h, running[f"mean{k}"], running[f"var{k}"], p[f"bn{k}.scale"], p[f"bn{k}.bias"],
                                training=True, momentum=0.1, eps=1e-5)

        h = x
        for block in range(2):
            inner = F.relu(conv_bn(h, 2 * block))
            h = F.relu(conv_bn(inner, 2 * block + 1) + h)
        return F.cross_entropy(h.mean(dim=(2, 3)) @ p["fc.w"] + p["fc.b"], y)

    def transformer(p, running, x, y):
        batch, seq, width, heads = x.shape[0], TRANSFORMER["seq"], TRANSFORMER["width"], TRANSFORMER["heads"]
        per_head = width // heads

        def dense(t, name):
            return t @ p[f"{name}.w"] + p[f"{name}.b"]

        def split_heads(t):
            return t.reshape(batch, seq, heads, per_head).permute(0, 2, 1, 3)

        h = F.layer_norm(x, (width,), p["ln1.scale"], p["ln1.bias"], eps=1e-5)
        q, k, v = (split_heads(dense(h, name)) for name in ("q", "k", "v"))
        weights = torch.softmax((q @ k.transpose(-1, -2)) / per_head ** 0.5, dim=-1)
        x1 = x + dense((weights @ v).permute(0, 2, 1, 3).reshape(batch, seq, width), "o")
        h2 = F.layer_norm(x1, (width,), p["ln2.scale"], p["ln2.bias"], eps=1e-5)
        out = x1 + dense(F.gelu(dense(h2, "ff1")), "ff2")
        return ((out - y) ** 2).mean()

    def rnn(p, running, x, y):
        h = x.new_zeros((x.shape[1], RNN["width"]))
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ p["w_xh"] + h @ p["w_hh"] + p["b"])
        return ((h @ p["w_out"] - y) ** 2).mean()

    return {"lenet": lenet, "resnet": resnet, "transformer": transformer, "rnn": rnn}


def torch_step(wl: Workload, device: str) -> Callable[[], float]:
    """One eager training step of ``wl`` on the torch ``device`` ("cpu" or "cuda:0"), from its parameters."""
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    loss_fn = _losses(torch, F)[wl.name]
    params = {k: torch.tensor(v, device=device, requires_grad=True) for k, v in wl.params.items()}
    running = {f"{s}{k}": (torch.ones if s == "var" else torch.zeros)(64, device=device)
               for s in ("mean", "var") for k in range(4)}
    x, y = torch.tensor(wl.x, device=device), torch.tensor(wl.y, device=device)
    if wl.optimizer == "adam":
        rule = torch.optim.Adam(params.values(), lr=wl.learning_rate, betas=(0.9, 0.999), eps=1e-8)
    else:
        rule = torch.optim.SGD(params.values(), lr=wl.learning_rate)

    def step() -> float:
        rule.zero_grad(set_to_none=True)
        loss = loss_fn(params, running, x, y)
        loss.backward()
        rule.step()
        return loss.item()

    return step
