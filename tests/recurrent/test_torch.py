"""nn.LSTM and nn.GRU against PyTorch: exported with torch.onnx.export (opset 17) and imported, and built with
``layers.lstm``/``layers.gru`` from the same weights. Outputs, the gradients of a loss in every parameter (and
the inputs), and five SGD steps equal PyTorch's (float32 to 1e-5, float64 to 1e-10).

torch is the oracle (the ``oracle`` extra); the checks are skipped without it, and fail under
``GRADGEN_REQUIRE_EXTRAS``.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from gradgen.framework import Executor, Scope, gradients, optimizer
from gradgen.program import Program, layers, program_guard
from gradgen.program.ops.recurrent import GATES
from tests.extras import require

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-12)}
STEPS, LR = 5, 0.1
STEPS_T, BATCH, FEATURES, HIDDEN = 4, 3, 3, 4
CONFIGS = [(cell, n, bi, bf) for cell in ("lstm", "gru") for n, bi, bf in
           [(1, False, False), (2, True, True), (2, False, True), (1, True, False)]]


class Net(torch.nn.Module if torch else object):
    """The recurrent module with its initial states as inputs; returns the outputs and final states."""

    def __init__(self, cell: str, num_layers: int, bidirectional: bool, batch_first: bool):
        super().__init__()
        kind = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        self.cell = cell
        self.rnn = kind(FEATURES, HIDDEN, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)

    def forward(self, x, *states):
        y, last = self.rnn(x, tuple(states) if self.cell == "lstm" else states[0])
        return (y, *last) if self.cell == "lstm" else (y, last)


def _setup(cell, num_layers, bidirectional, batch_first, dtype):
    require(None if torch else "torch", "pip install -e '.[oracle]'")
    torch.manual_seed(num_layers * 10 + bidirectional * 2 + batch_first)
    net = Net(cell, num_layers, bidirectional, batch_first).to(getattr(torch, dtype))
    rng = np.random.default_rng(3)
    dirs = 2 if bidirectional else 1
    x = rng.standard_normal((BATCH, STEPS_T, FEATURES) if batch_first else (STEPS_T, BATCH, FEATURES))
    states = [rng.standard_normal((num_layers * dirs, BATCH, HIDDEN)) for _ in range(2 if cell == "lstm" else 1)]
    feed = {"x": x.astype(dtype), **{f"s{k}": s.astype(dtype) for k, s in enumerate(states)}}
    return net, feed


def _torch_loss(net, feed, weights):
    outs = net(*(torch.tensor(v) for v in feed.values()))
    return sum((o * torch.tensor(w)).sum() for o, w in zip(outs, weights)), outs


def _weights(shapes, dtype):
    rng = np.random.default_rng(11)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _torch_steps(net, feed, weights):
    """Five SGD steps; the loss before each and the parameters after."""
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss, _ = _torch_loss(net, feed, weights)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def _gradgen_loss(outs, weights_names, dtype):
    ws = [layers.data(n, list(o.shape), dtype) for n, o in zip(weights_names, outs)]
    return layers.sum([layers.reduce_sum(o * w) for o, w in zip(outs, ws)])


def _onnx_param_names(model, cell):
    """For each recurrent node in order: its W, R and (when given) B initializer names."""
    op = cell.upper()
    return [list(n.input[1:4]) for n in model.graph.node if n.op_type == op]


def _torch_of_onnx(net, cell, onnx_names, grads: dict, dirs: int):
    """gradgen's values for the ONNX W, R, B as PyTorch's parameters: direction d's gate rows back in order."""
    from gradgen.framework.tools.onnx.import_recurrent import gate_rows
    rows, out = gate_rows(cell, HIDDEN), {}
    for layer, (w, r, b) in enumerate(onnx_names):
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            out[f"rnn.weight_ih{sfx}"] = grads[w][d][rows]
            out[f"rnn.weight_hh{sfx}"] = grads[r][d][rows]
            out[f"rnn.bias_ih{sfx}"] = grads[b][d][rows]
            out[f"rnn.bias_hh{sfx}"] = grads[b][d][GATES[cell] * HIDDEN + rows]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cell,num_layers,bidirectional,batch_first", CONFIGS)
def test_an_exported_module_imports_and_trains_as_pytorch(cell, num_layers, bidirectional, batch_first, dtype):
    require(None if torch else "torch", "pip install -e '.[oracle]'")
    from gradgen.framework import import_onnx

    net, feed = _setup(cell, num_layers, bidirectional, batch_first, dtype)
    names = list(feed)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, tuple(torch.tensor(v) for v in feed.values()), buf, opset_version=17, dynamo=False,
                          input_names=names, output_names=[f"out{k}" for k in range(len(names))])
    import onnx
    model = onnx.load_from_string(buf.getvalue())
    main, params, outputs = import_onnx(model)
    block = main.global_block()
    outs = [block.var(outputs[f"out{k}"]) for k in range(len(outputs))]
    weights = _weights([o.shape for o in outs], dtype)
    wnames = [f"w{k}" for k in range(len(outs))]
    onnx_names = _onnx_param_names(model, cell)
    with program_guard(main, Program()):
        loss = _gradgen_loss(outs, wnames, dtype)
        wrt = [block.var(n) for n in names] + [block.var(n) for ns in onnx_names for n in ns]
        grads = gradients(loss, wrt)
    scope, exe = Scope(), Executor()
    for k, v in params.items():
        scope.set(k, v)
    full = {**feed, **dict(zip(wnames, weights))}
    got = exe.run(main, feed=full, fetch_list=[*outs, *grads], scope=scope)
    # the inputs' gradients need leaf tensors
    leaves = [torch.tensor(v, requires_grad=True) for v in feed.values()]
    want_outs = net(*leaves)
    sum((o * torch.tensor(w)).sum() for o, w in zip(want_outs, weights)).backward()
    for g, w in zip(got[:len(outs)], want_outs):
        np.testing.assert_allclose(g, w.detach().numpy(), **TOL[dtype])
    got_grads = dict(zip([v.name for v in wrt], got[len(outs):]))
    for n, leaf in zip(names, leaves):
        np.testing.assert_allclose(got_grads[n], leaf.grad.numpy(), **TOL[dtype], err_msg=f"d loss / d {n}")
    mapped = _torch_of_onnx(net, cell, onnx_names, got_grads, 2 if bidirectional else 1)
    torch_params = dict(net.named_parameters())
    assert sorted(mapped) == sorted(torch_params)
    for n, p in torch_params.items():
        np.testing.assert_allclose(mapped[n], p.grad.numpy(), **TOL[dtype], err_msg=f"d loss / d {n}")
    # five SGD steps, from the same weights
    train, start = main.clone(), Program()
    with program_guard(train, start):
        tblock = train.global_block()
        tloss = tblock.var(loss.name)
        trainable = [tblock.var(n) for ns in onnx_names for n in ns]
        pg = list(zip(trainable, gradients(tloss, trainable)))
        optimizer.SGD(learning_rate=LR).apply_gradients(pg)
    scope = Scope()
    exe.run(start, scope=scope)
    for k, v in params.items():
        scope.set(k, v.copy())
    losses = [float(exe.run(train, feed=full, fetch_list=[tloss], scope=scope)[0]) for _ in range(STEPS)]
    want_losses = _torch_steps(net, feed, weights)
    np.testing.assert_allclose(losses, want_losses, **TOL[dtype])
    trained = _torch_of_onnx(net, cell, onnx_names, {n: np.asarray(scope[n]) for ns in onnx_names for n in ns},
                             2 if bidirectional else 1)
    for n, p in net.named_parameters():
        np.testing.assert_allclose(trained[n], p.detach().numpy(), **TOL[dtype], err_msg=f"{n} after {STEPS} steps")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cell,num_layers,bidirectional,batch_first", CONFIGS)
def test_the_layer_trains_as_pytorch_from_the_same_weights(cell, num_layers, bidirectional, batch_first, dtype):
    net, feed = _setup(cell, num_layers, bidirectional, batch_first, dtype)
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data("x", [-1] + list(feed["x"].shape[1:]), dtype)
        states = [layers.data(n, list(feed[n].shape), dtype) for n in feed if n != "x"]
        if cell == "lstm":
            y, (h, c) = layers.lstm(x, HIDDEN, num_layers, bidirectional, batch_first, initial_states=tuple(states),
                                    name="rnn")
            outs = [y, h, c]
        else:
            y, h = layers.gru(x, HIDDEN, num_layers, bidirectional, batch_first, initial_state=states[0], name="rnn")
            outs = [y, h]
        shapes = [tuple(o.shape) for o in net(*(torch.tensor(v) for v in feed.values()))]
        weights = _weights(shapes, dtype)
        loss = _gradgen_loss(outs, [f"w{k}" for k in range(len(outs))], dtype)
        optimizer.SGD(learning_rate=LR).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    torch_params = {n: p.detach().numpy().copy() for n, p in net.named_parameters()}
    assert sorted(n for n in scope if n.startswith("rnn.")) == sorted(torch_params)
    for n, v in torch_params.items():
        scope.set(n, v)
    full = {**feed, **{f"w{k}": w for k, w in enumerate(weights)}}
    losses = [float(exe.run(main, feed=full, fetch_list=[loss], scope=scope)[0]) for _ in range(STEPS)]
    np.testing.assert_allclose(losses, _torch_steps(net, feed, weights), **TOL[dtype])
    for n, p in net.named_parameters():
        np.testing.assert_allclose(np.asarray(scope[n]), p.detach().numpy(), **TOL[dtype], err_msg=n)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_a_default_export_without_initial_states_imports(cell):
    """PyTorch builds the zero initial states of a default export from Shape -> Gather -> Concat -> Expand:
    import-time constant folding turns them into constants, and the imported model computes PyTorch's output."""
    require(None if torch else "torch", "pip install -e '.[oracle]'")
    from gradgen.framework import Executor, Scope, import_onnx

    torch.manual_seed(0)
    net = getattr(torch.nn, cell)(4, 6, num_layers=2, bidirectional=True, batch_first=True).double()
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), buf, opset_version=17, dynamo=False, input_names=["x"], output_names=["y"])
    main, params, outputs = import_onnx(buf.getvalue())
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    (got,) = Executor().run(main, feed={"x": x.numpy()}, fetch_list=[outputs["y"]], scope=scope)
    np.testing.assert_allclose(got, net(x)[0].detach().numpy(), rtol=1e-12, atol=1e-12)
