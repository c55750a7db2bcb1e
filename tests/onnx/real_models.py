"""Real architectures for the whole-model proof of the ONNX importer (issue 23), written here in plain PyTorch
(torchvision is not installed: its wheel is a CUDA build). They follow the published architectures — written
here, not copied:

- ResNet-18: He et al., "Deep Residual Learning for Image Recognition" (2015): a 7x7/2 stem and 3x3/2 max pool,
  four stages of two BasicBlocks (64, 128, 256, 512 channels, a 1x1 projection where the shape changes),
  global average pool, a linear classifier. Real widths and depth; only the inputs are small.
- MobileNet-V2: Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks" (2018): the paper's
  block table (t, c, n, s), ReLU6, linear bottlenecks, residuals where stride 1 keeps the width. Channels are
  scaled by ``width_mult`` (rounded to multiples of 8, as the paper's code does); the tests use 0.5 to halve the
  time, the depth and the 1280-wide last layer stay.
- EfficientNet-B0: Tan & Le, "EfficientNet: Rethinking Model Scaling for CNNs" (2019): the B0 table of MBConv
  blocks (expansion, kernel, stride, channels, repeats) with squeeze-and-excitation (a quarter of the block's
  input width), SiLU, and stochastic depth (Huang et al. 2016) growing linearly to ``drop_rate`` over the blocks.
  B0's widths and depth unscaled.
- Text classifiers: ``nn.Embedding`` then a (bidirectional, two-layer) ``nn.LSTM`` or ``nn.GRU``, the last step,
  a linear layer; integer token ids in.
- An MLP: Linear, LayerNorm, GELU, Dropout, Linear.
"""
from __future__ import annotations

from tests.onnx.torch_models import torch

__all__ = ["ResNet18", "MobileNetV2", "EfficientNetB0", "StochasticDepth", "TextClassifier", "MLP"]

nn = torch.nn


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and an identity (or 1x1-projected) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(cin, cout, 3, stride), nn.ReLU(), *_conv_bn(cout, cout, 3))
        self.shortcut = (nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout
                         else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def _divisible(channels: float, by: int = 8) -> int:
    """``channels`` rounded to a multiple of ``by``, never below 90% of it (the MobileNet papers' rounding)."""
    rounded = max(by, int(channels + by / 2) // by * by)
    return rounded + by if rounded < 0.9 * channels else rounded


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expansion (ReLU6), 3x3 depthwise (ReLU6), linear 1x1 projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        wide = cin * expand
        layers = [*_conv_bn(cin, wide, 1), nn.ReLU6()] if expand != 1 else []
        layers += [*_conv_bn(wide, wide, 3, stride, groups=wide), nn.ReLU6(), *_conv_bn(wide, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


MOBILENET_V2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1))
"""The paper's table 2: expansion t, output channels c, repeats n, first stride s."""


class MobileNetV2(nn.Module):
    def __init__(self, classes: int = 10, width_mult: float = 1.0):
        super().__init__()
        cin = _divisible(32 * width_mult)
        layers = [*_conv_bn(3, cin, 3, 2), nn.ReLU6()]
        for t, c, n, s in MOBILENET_V2_BLOCKS:
            cout = _divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        last = _divisible(1280 * max(1.0, width_mult))
        self.features = nn.Sequential(*layers, *_conv_bn(cin, last, 1), nn.ReLU6())
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class StochasticDepth(nn.Module):
    """In training, drops the whole residual branch of each example with probability ``p`` and scales the kept
    ones by 1 / (1 - p); the identity in inference. The draw is ``rand_like`` (ONNX RandomUniformLike) on every
    training forward, ``p`` = 0 included, so an export with ``p`` = 0 keeps the random node yet computes exactly."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training:
            return x
        keep = (torch.rand_like(x[:, :1, :1, :1]) >= self.p).to(x.dtype)
        return x * keep / (1.0 - self.p)


class MBConv(nn.Module):
    """EfficientNet's block: 1x1 expansion (SiLU), kxk depthwise (SiLU), squeeze-and-excitation, linear 1x1
    projection, and a stochastic-depth residual where stride 1 keeps the width."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int, drop: float):
        super().__init__()
        wide, squeezed = cin * expand, max(1, cin // 4)
        self.expand = nn.Sequential(*_conv_bn(cin, wide, 1), nn.SiLU()) if expand != 1 else nn.Identity()
        self.depthwise = nn.Sequential(*_conv_bn(wide, wide, kernel, stride, groups=wide), nn.SiLU())
        self.squeeze = nn.Sequential(nn.Conv2d(wide, squeezed, 1), nn.SiLU(), nn.Conv2d(squeezed, wide, 1),
                                     nn.Sigmoid())
        self.project = nn.Sequential(*_conv_bn(wide, cout, 1))
        self.residual = StochasticDepth(drop) if stride == 1 and cin == cout else None

    def forward(self, x):
        h = self.depthwise(self.expand(x))
        h = self.project(h * self.squeeze(h.mean((2, 3), keepdim=True)))
        return x + self.residual(h) if self.residual is not None else h


EFFICIENTNET_B0_BLOCKS = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                          (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))
"""The paper's table 1 for B0: expansion, kernel, first stride, output channels, repeats."""


class EfficientNetB0(nn.Module):
    def __init__(self, classes: int = 10, drop_rate: float = 0.2):
        super().__init__()
        layers, cin = [*_conv_bn(3, 32, 3, 2), nn.SiLU()], 32
        total, index = sum(b[-1] for b in EFFICIENTNET_B0_BLOCKS), 0
        for expand, kernel, stride, cout, repeats in EFFICIENTNET_B0_BLOCKS:
            for i in range(repeats):
                layers.append(MBConv(cin, cout, kernel, stride if i == 0 else 1, expand, drop_rate * index / total))
                cin, index = cout, index + 1
        self.features = nn.Sequential(*layers, *_conv_bn(cin, 1280, 1), nn.SiLU())
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class TextClassifier(nn.Module):
    """Token ids -> embedding -> a recurrent encoder (``cell`` "LSTM" or "GRU") -> its last step -> classes."""

    def __init__(self, cell: str, vocab: int = 50, embed: int = 12, hidden: int = 16, classes: int = 4,
                 layers: int = 2, bidirectional: bool = True):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = getattr(nn, cell)(embed, hidden, layers, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, tokens):
        return self.fc(self.rnn(self.embed(tokens))[0][:, -1])


class MLP(nn.Module):
    def __init__(self, features: int = 20, hidden: int = 32, classes: int = 5, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)
