"""The ops grad makers emit, differentiated directly: first and second order, so third-order gradients of
forward ops hold too. Inputs that only give a shape or a mask are fed, not differentiated."""
import numpy as np
import pytest

from gradgen.program.layers.helper import append

from .checking import check_op_gradients


def _x(shape, seed=0, away=False):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape)
    return np.sign(v) * (np.abs(v) + 0.3) if away else v


def _raw(op_type, slots, out="X@GRAD", **attrs):
    """A builder appending ``op_type``; ``slots`` maps each slot to the keyword it is fed under."""
    def build(**vars_):
        return append(op_type, {slot: vars_[name] for slot, name in slots.items()}, attrs, out_slots=(out,))

    return build



CASES = {
    "relu_grad": (_raw("relu_grad", {"Out": "m", "Out@GRAD": "g"}), {"g": (3, 4)}, {"m": _x((3, 4), 1, True)}),
    "tanh_grad": (_raw("tanh_grad", {"Out": "o", "Out@GRAD": "g"}), {"o": (3, 4), "g": (3, 4)}, {}),
    "sigmoid_grad": (_raw("sigmoid_grad", {"Out": "o", "Out@GRAD": "g"}), {"o": (2, 3), "g": (2, 3)}, {}),
    "leaky_relu_grad": (_raw("leaky_relu_grad", {"X": "m", "Out@GRAD": "g"}, alpha=0.2), {"g": (3, 4)},
                        {"m": _x((3, 4), 1, True)}),
    "clip_grad": (_raw("clip_grad", {"X": "m", "Out@GRAD": "g"}, min=-0.5, max=0.5), {"g": (3, 4)},
                  {"m": _x((3, 4), 1, True)}),
    "gelu_grad": (_raw("gelu_grad", {"X": "m", "Out@GRAD": "g"}), {"m": (3, 4), "g": (3, 4)}, {}),
    "slice_grad": (_raw("slice_grad", {"X": "s", "Out@GRAD": "g"}, axes=[1], starts=[1], ends=[3]), {"g": (3, 2)},
                   {"s": _x((3, 4))}),
    "gather_grad": (_raw("gather_grad", {"X": "s", "Index": "i", "Out@GRAD": "g"}, axis=0), {"g": (4, 2)},
                    {"s": _x((3, 2)), "i": np.array([0, 2, 2, 1])}),
    "reduce_mean_grad": (_raw("reduce_mean_grad", {"X": "s", "Out@GRAD": "g"}, dim=[1]), {"g": (3,)},
                         {"s": _x((3, 4))}),
    "reshape_as": (_raw("reshape_as", {"X": "g", "Target": "s"}, out="Out"), {"g": (3, 4)}, {"s": _x((2, 6))}),
    "reduce_as": (_raw("reduce_as", {"X": "g", "Target": "s"}, out="Out"), {"g": (3, 4)}, {"s": _x((1, 4))}),
    "conv2d_input_grad": (_raw("conv2d_input_grad", {"Filter": "w", "Output@GRAD": "g", "Input": "s"},
                               out="Input@GRAD", strides=[1, 1], paddings=[1, 0]),
                          {"w": (3, 2, 2, 2), "g": (1, 3, 5, 3)}, {"s": _x((1, 2, 4, 4))}),
    "conv2d_filter_grad": (_raw("conv2d_filter_grad", {"Input": "x", "Output@GRAD": "g", "Filter": "s"},
                                out="Filter@GRAD", strides=[2, 1]),
                           {"x": (1, 2, 5, 4), "g": (1, 3, 2, 3)}, {"s": _x((3, 2, 2, 2))}),
    "pool2d_grad_avg": (_raw("pool2d_grad", {"X": "s", "Out@GRAD": "g"}, pooling_type="avg", ksize=[2, 2],
                             strides=[1, 1], paddings=[1, 1]), {"g": (1, 2, 4, 4)}, {"s": _x((1, 2, 3, 3))}),
    "pool2d_grad_max": (_raw("pool2d_grad", {"X": "s", "Out@GRAD": "g"}, pooling_type="max", ksize=[2, 2],
                             strides=[2, 2]), {"g": (1, 2, 2, 2)}, {"s": _x((1, 2, 4, 4))}),
    "pool2d_select": (_raw("pool2d_select", {"X": "s", "D": "d"}, out="Out", pooling_type="max", ksize=[2, 2],
                           strides=[1, 1]), {"d": (1, 1, 3, 3)}, {"s": _x((1, 1, 3, 3))}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_emitted_op_gradients(name):
    build, diff_shapes, fed = CASES[name]
    inputs = {k: _x(shape, seed=i + 2) for i, (k, shape) in enumerate(diff_shapes.items())}
    names = list(inputs)
    check_op_gradients(lambda *xs, **extra: build(**dict(zip(names, xs)), **extra), inputs, extra_feed=fed)
