"""Paddle's book chapters 01 (fit a line) and 02 (recognize digits: MLP and LeNet), run as the book wrote them.

The port modules are the book's files with gradgen's ``paddle`` and ``fluid`` imported (see each file's header
for the edit count). Each test does what the book's ``__main__`` block does (set ``args`` and the constants,
call ``main``), inside a fresh default program pair and a fresh global scope, in a temporary working directory,
with ``paddle.dataset.common.DATA_HOME`` on synthetic data files in the real data sets' formats and Python's
``random`` (which ``paddle.reader.shuffle`` draws from, as Paddle's does) seeded.
"""
from __future__ import annotations

import random
import re
from argparse import Namespace

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from gradgen.framework import Executor, Scope, load_inference_model, paddle, scope_guard
from gradgen.program import Program, program_guard

from . import fit_a_line, recognize_digits, synthetic_data


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "dataset"
    synthetic_data.write_uci_housing(home)
    synthetic_data.write_mnist(home)
    monkeypatch.setattr(paddle.dataset.common, "DATA_HOME", str(home))
    random.seed(0)
    # One BLAS thread: the book's products are small, and with this machine's OPENBLAS_CORETYPE=Haswell two
    # OpenBLAS threads made LeNet's batched conv products 0.3 s each (35 s for the test; 2 s with one thread).
    with program_guard(Program(), Program()), scope_guard(Scope()), threadpool_limits(1):
        yield tmp_path


def _costs(text: str, prompt: str) -> list[float]:
    return [float(c) for c in re.findall(rf"{prompt}, Step \d+, Cost ([-\d.e+naif]+)", text)]


def test_fit_a_line(fresh, capsys, monkeypatch):
    plotted = []
    monkeypatch.setattr(fit_a_line, "save_result", lambda predictions, truth: plotted.append((predictions, truth)))
    monkeypatch.setattr(fit_a_line, "args", Namespace(enable_ce=False, use_gpu=False, num_epochs=20), raising=False)
    fit_a_line.main()
    out = capsys.readouterr().out
    train, test = _costs(out, "Train cost"), _costs(out, "Test cost")
    assert len(train) >= 40 and len(test) >= 4
    assert train[-1] < train[0] / 2 and test[-1] < test[0] / 2  # the loss, a [1]-shaped fetch, fell

    # the inference model holds the pruned program and only the fc parameters
    model = fresh / "fit_a_line.inference.model"
    with np.load(model / "params.npz") as params:
        assert sorted(params.files) == ["fc_0.b_0", "fc_0.w_0"]
    (predictions, truth), = plotted
    assert predictions.shape == (10, 1) and truth.shape == (10, 1)
    # SGD at the book's rate 0.001 is still far from the least-squares fit, but already ranks the houses
    assert np.corrcoef(predictions[:, 0], truth[:, 0])[0, 1] > 0.8
    printed = [float(v) for v in re.findall(r"^\d+: ([-\d.]+)$", out.split("infer results: (House Price)")[1]
                                            .split("ground truth:")[0], flags=re.M)]
    np.testing.assert_allclose(printed, predictions[:, 0], atol=0.006)

    # what the book's infer step loaded runs the same in any scope
    scope = Scope()
    program, feeds, fetches = load_inference_model(str(model), scope=scope)
    xs = np.stack([x for x, _ in paddle.dataset.uci_housing.test()()][:10]).astype(np.float32)
    (again,) = Executor().run(program, feed={feeds[0]: xs}, fetch_list=fetches, scope=scope)
    np.testing.assert_allclose(again, predictions, rtol=1e-6)


def _recognize_digits(monkeypatch, capsys, nn_type: str, passes: int = 2) -> str:
    monkeypatch.setattr(recognize_digits, "args", Namespace(enable_ce=False, use_gpu=False, num_epochs=2),
                        raising=False)
    monkeypatch.setattr(recognize_digits, "BATCH_SIZE", 64, raising=False)
    monkeypatch.setattr(recognize_digits, "PASS_NUM", passes, raising=False)
    recognize_digits.main(use_cuda=False, nn_type=nn_type)
    out = capsys.readouterr().out
    accuracy = float(re.search(r"The classification accuracy is ([\d.]+)%", out).group(1))
    assert accuracy > 90.0
    assert "Inference result of image/infer_3.png is: 3" in out
    return out


def test_recognize_digits_mlp(fresh, capsys, monkeypatch):
    _recognize_digits(monkeypatch, capsys, "multilayer_perceptron")
    with np.load(fresh / "recognize_digits_multilayer_perceptron.inference.model" / "params.npz") as params:
        assert sorted(params.files) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0", "fc_2.b_0", "fc_2.w_0"]


def test_recognize_digits_lenet(fresh, capsys, monkeypatch):
    """The book's default network: two conv-pool blocks with batch norm between them."""
    _recognize_digits(monkeypatch, capsys, "convolutional_neural_network", passes=1)
    with np.load(fresh / "recognize_digits_convolutional_neural_network.inference.model" / "params.npz") as params:
        assert {"conv2d_0.w_0", "conv2d_1.w_0", "batch_norm_0.scale", "batch_norm_0.mean"} <= set(params.files)
