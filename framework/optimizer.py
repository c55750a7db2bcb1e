"""Optimizers: they append update ops (role ``optimize``) after the backward part of a program.

Each optimizer keeps its state (learning rate, velocities, moments, beta
powers) in persistable vars initialized by ops in the startup program, so a
saved program and parameter file hold everything a run needs.

>>> opt = optimizer.SGD(learning_rate=0.01)
>>> optimize_ops, params_grads = opt.minimize(loss)

``learning_rate`` may also be a schedule's output (``layers.exponential_decay(...)``
and friends): a var the program computes every step from its step counter.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from gradgen.program.guard import default_startup_program
from gradgen.program.initializer import Constant
from gradgen.program.variable import Variable

from .passes.backward import append_backward
from gradgen.program.errors import ProgramError


class Optimizer:
    """What every optimizer shares: state vars, weight decay and clipping, and the update loop.

    ``weight_decay`` adds ``coeff * param`` to each gradient (L2 regularization);
    ``grad_clip`` rescales all gradients together so their global norm is at
    most that value. Both are ops in the program, like the update itself.
    """

    op_type = ""
    clip_before_decay = False
    """gradgen adds the L2 term, then clips; Paddle's optimizers (the ``fluid`` facade) clip, then add it."""

    def __init__(self, learning_rate: float | Variable, weight_decay: float | None = None,
                 grad_clip: float | None = None):
        if isinstance(learning_rate, Variable):
            if learning_rate.shape not in ((), (1,)) or not learning_rate.dtype.startswith("float"):
                raise ProgramError(f"a learning_rate Variable must be a float scalar (a schedule's output), got "
                                   f"'{learning_rate.name}' {learning_rate.type_str()}")
            self.schedule: Variable | None = learning_rate
        else:
            if not learning_rate > 0:
                raise ProgramError(f"learning_rate must be positive, got {learning_rate}")
            self.schedule = None
        self.learning_rate = learning_rate if self.schedule is not None else float(learning_rate)
        self.weight_decay = weight_decay
        self.grad_clip = grad_clip
        self._lr_vars: dict[tuple[int, str], Variable] = {}

    # -- state ----------------------------------------------------------------
    def _state(self, param: Variable, suffix: str, value: float, shape=None) -> Variable:
        """A persistable var ``param@suffix`` in the main program, filled with ``value`` by the startup program."""
        block = param.block.program.global_block()
        name = f"{param.name}@{suffix}"
        shape = tuple(param.shape if shape is None else shape)
        if name in block.vars:
            return block.vars[name]
        var = block.create_var(name, shape, param.dtype, persistable=True, stop_gradient=True)
        startup = default_startup_program().global_block()
        if name not in startup.vars:
            startup.create_var(name, shape, param.dtype, persistable=True, stop_gradient=True)
            op_type, attrs = Constant(value).op(shape, param.dtype, 0)
            startup.append_op(op_type, {}, {"Out": [name]}, attrs)
        return var

    def _learning_rate(self, param: Variable) -> Variable:
        block = param.block.program.global_block()
        key = (id(block.program), param.dtype)
        if key not in self._lr_vars and self.schedule is not None:
            self._lr_vars[key] = self._scheduled(block, param)
        if key not in self._lr_vars:
            name = block.program.unique_name(f"learning_rate_{param.dtype}")
            var = block.create_var(name, (), param.dtype, persistable=True, stop_gradient=True)
            startup = default_startup_program().global_block()
            startup.create_var(name, (), param.dtype, persistable=True, stop_gradient=True)
            startup.append_op("fill_constant", {}, {"Out": [name]},
                              {"shape": [], "dtype": param.dtype, "value": self.learning_rate})
            self._lr_vars[key] = var
        return self._lr_vars[key]

    def _scheduled(self, block, param: Variable) -> Variable:
        """The schedule's output, cast (once per dtype) to the parameter's dtype when they differ."""
        lr = self.schedule
        if lr.block.program is not block.program:
            raise ProgramError(f"the learning-rate schedule '{lr.name}' belongs to another program than "
                               f"parameter '{param.name}'")
        if lr.dtype == param.dtype:
            return lr
        name = block.program.unique_name(f"{lr.name}@{param.dtype}")
        block.append_op("cast", {"X": [lr.name]}, {"Out": [name]}, {"out_dtype": param.dtype}, role="optimize")
        return block.var(name)

    # -- the update -------------------------------------------------------------
    def _append_update(self, block, param: Variable, grad: Variable):
        raise NotImplementedError

    def _regularized(self, block, params_grads):
        out = []
        for p, g in params_grads:
            if self.weight_decay:
                decay = block.append_op("scale", {"X": p}, {"Out": [block.program.unique_name(f"{g.name}@DECAY")]},
                                        {"scale": float(self.weight_decay)}, role="optimize")
                total = block.append_op("elementwise_add", {"X": g, "Y": decay.output("Out")[0]},
                                        {"Out": [block.program.unique_name(f"{g.name}@REGULARIZED")]},
                                        role="optimize")
                g = block.var(total.output("Out")[0])
            out.append((p, g))
        return out

    def _clipped(self, block, params_grads):
        if not self.grad_clip or not params_grads:
            return params_grads
        names = [block.program.unique_name(f"{g.name}@CLIPPED") for _, g in params_grads]
        block.append_op("clip_by_global_norm", {"X": [g for _, g in params_grads]}, {"Out": names},
                        {"max_norm": float(self.grad_clip)}, role="optimize")
        return [(p, block.var(n)) for (p, _), n in zip(params_grads, names)]

    def apply_gradients(self, params_grads: Sequence[tuple[Variable, Variable]]) -> list:
        """Append weight decay, clipping and one update op per parameter; return the update ops."""
        params_grads = [(p, g) for p, g in params_grads if g is not None]
        if not params_grads:
            return []
        block = params_grads[0][0].block.program.global_block()
        if self.clip_before_decay:
            params_grads = self._regularized(block, self._clipped(block, params_grads))
        else:
            params_grads = self._clipped(block, self._regularized(block, params_grads))
        return [self._append_update(block, p, g) for p, g in params_grads]

    def minimize(self, loss: Variable, parameter_list: Sequence | None = None,
                 no_grad_set: Iterable | None = None) -> tuple[list, list]:
        """``append_backward`` then ``apply_gradients``; returns ``(optimize_ops, params_grads)``."""
        params_grads = append_backward(loss, parameter_list, no_grad_set)
        return self.apply_gradients(params_grads), params_grads


class SGD(Optimizer):
    """param -= learning_rate * grad."""

    def _append_update(self, block, param, grad):
        return block.append_op("sgd", {"Param": param, "Grad": grad, "LearningRate": self._learning_rate(param)},
                               {"ParamOut": [param.name]}, role="optimize")


class Momentum(Optimizer):
    """Heavy-ball momentum (or Nesterov's variant): velocity = mu * velocity + grad."""

    def __init__(self, learning_rate: float, momentum: float = 0.9, use_nesterov: bool = False, **kw):
        super().__init__(learning_rate, **kw)
        self.momentum = float(momentum)
        self.use_nesterov = bool(use_nesterov)

    def _append_update(self, block, param, grad):
        v = self._state(param, "velocity", 0.0)
        return block.append_op("momentum", {"Param": param, "Grad": grad, "Velocity": v,
                                            "LearningRate": self._learning_rate(param)},
                               {"ParamOut": [param.name], "VelocityOut": [v.name]},
                               {"mu": self.momentum, "use_nesterov": self.use_nesterov}, role="optimize")


class Adam(Optimizer):
    """Adam with bias correction (Kingma & Ba, 2015), in Paddle's form with running beta powers."""

    op_type = "adam"

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, **kw):
        super().__init__(learning_rate, **kw)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def _attrs(self) -> dict:
        return {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}

    def _append_update(self, block, param, grad):
        m1, m2 = self._state(param, "moment1", 0.0), self._state(param, "moment2", 0.0)
        b1p = self._state(param, "beta1_pow", self.beta1, shape=())
        b2p = self._state(param, "beta2_pow", self.beta2, shape=())
        return block.append_op(
            self.op_type, {"Param": param, "Grad": grad, "LearningRate": self._learning_rate(param), "Moment1": m1,
                           "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p},
            {"ParamOut": [param.name], "Moment1Out": [m1.name], "Moment2Out": [m2.name],
             "Beta1PowOut": [b1p.name], "Beta2PowOut": [b2p.name]}, self._attrs(), role="optimize")


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), as torch.optim.AdamW:
    each step first shrinks the parameter by ``learning_rate * weight_decay``, then takes Adam's step.

    ``weight_decay`` here is that decoupled factor, not the L2 term other optimizers add to the gradient
    (``l2_decay`` is that one, should both be wanted).
    """

    op_type = "adamw"

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.01, l2_decay: float | None = None, **kw):
        super().__init__(learning_rate, beta1, beta2, epsilon, weight_decay=l2_decay, **kw)
        self.coeff = float(weight_decay)

    def _attrs(self) -> dict:
        return {**super()._attrs(), "coeff": self.coeff}


class Lamb(Adam):
    """LAMB (You et al., 2020): Adam's direction plus ``lamb_weight_decay * param``, its step scaled per
    parameter by the trust ratio ||param|| / ||direction|| (1 when either norm is 0), as Paddle's lamb op."""

    op_type = "lamb"

    def __init__(self, learning_rate: float | Variable = 0.001, lamb_weight_decay: float = 0.01, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-6, **kw):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kw)
        self.lamb_weight_decay = float(lamb_weight_decay)

    def _attrs(self) -> dict:
        return {**super()._attrs(), "weight_decay": self.lamb_weight_decay}


class RMSProp(Optimizer):
    """RMSProp (Hinton's lecture 6e) as torch.optim.RMSprop computes it: a running mean of squared gradients
    (``rho`` is torch's ``alpha``), optionally centered by the running mean gradient, with heavy-ball momentum."""

    def __init__(self, learning_rate: float | Variable, rho: float = 0.95, epsilon: float = 1e-6,
                 momentum: float = 0.0, centered: bool = False, **kw):
        super().__init__(learning_rate, **kw)
        self.rho, self.epsilon = float(rho), float(epsilon)
        self.momentum, self.centered = float(momentum), bool(centered)

    def _append_update(self, block, param, grad):
        ms, mg, mom = (self._state(param, name, 0.0) for name in ("mean_square", "mean_grad", "moment"))
        return block.append_op(
            "rmsprop", {"Param": param, "Grad": grad, "LearningRate": self._learning_rate(param), "MeanSquare": ms,
                        "MeanGrad": mg, "Moment": mom},
            {"ParamOut": [param.name], "MeanSquareOut": [ms.name], "MeanGradOut": [mg.name],
             "MomentOut": [mom.name]},
            {"rho": self.rho, "epsilon": self.epsilon, "momentum": self.momentum, "centered": self.centered},
            role="optimize")


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011): each coordinate's step divided by the root of its summed squared gradients,
    the sum starting at ``initial_accumulator_value``."""

    def __init__(self, learning_rate: float | Variable, epsilon: float = 1e-6, initial_accumulator_value: float = 0.0,
                 **kw):
        super().__init__(learning_rate, **kw)
        self.epsilon, self.initial_accumulator_value = float(epsilon), float(initial_accumulator_value)

    def _append_update(self, block, param, grad):
        moment = self._state(param, "moment", self.initial_accumulator_value)
        return block.append_op("adagrad", {"Param": param, "Grad": grad, "LearningRate": self._learning_rate(param),
                                           "Moment": moment},
                               {"ParamOut": [param.name], "MomentOut": [moment.name]}, {"epsilon": self.epsilon},
                               role="optimize")


__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "Lamb", "RMSProp", "Adagrad"]
