"""Recording a module's forward as a TorchScript graph, shared by the families.

A traced graph runs the same ATen ops on the same values as the eager forward it was
recorded from (the same results bit for bit), without the Python interpreter between
the ops, and it releases the GIL while it runs: the engine's model and codec threads then
stop queueing for the interpreter (figures: docs/speed-choices.md). Sizes read from tensors
(``x.shape[0]``) and passed on to tensor operations stay symbolic in the graph, so one graph
serves every batch size; Python ints, branches, and anything a size is turned into in Python
(``int()``, ``numel()`` compared, ``dim()``) are fixed at their traced values.
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch import nn


class AsRecorded:
    """A traced graph that always runs as recorded: TorchScript's graph executor does not
    optimize it (``torch.jit.optimized_execution(False)``, a per-thread switch, set around
    each call). Optimizing specializes the graph to the shapes seen in its first calls and
    rewrites some ops (e.g. decomposes normalizations), so that a call's rounding would
    depend on which shapes came before; as recorded, a call gives the eager forward's
    results bit for bit, whatever the history."""

    def __init__(self, graph: torch.jit.ScriptModule):
        self.graph = graph

    def __call__(self, *args):
        before = torch._C._get_graph_executor_optimize()
        torch._C._set_graph_executor_optimize(False)
        try:
            return self.graph(*args)
        finally:
            torch._C._set_graph_executor_optimize(before)


class _Flat(nn.Module):
    """``module``'s forward, with its parameters and buffers held flat on this one module
    (the same tensors, not copies) and ``module`` itself kept outside the module tree.
    ``torch.jit.trace`` wraps every submodule of what it traces in a ``ScriptModule`` of its
    own (for Pocket TTS some 430, most of a second of each load on a 2-core CPU); here it
    wraps this one, and the graph reads each weight as an attribute of it, as it would have
    read it from the submodule (so oneDNN's opaque packed weights, which a graph cannot
    hold as constants, work as before). A submodule holding a TorchScript object (PyTorch's
    quantized linears keep their packed weights so) is registered whole instead: the
    tracer finds such objects only on a registered module."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.__dict__["inner"] = module
        whole, seen = [], set()
        for name, m in module.named_modules():
            if any(w == "" or name.startswith(w + ".") for w in whole):
                continue
            if any(isinstance(v, torch.ScriptObject) for v in vars(m).values()):
                whole.append(name)
                self.add_module(f"m{len(whole)}", m)
                seen.update(id(t) for t in (*m.parameters(), *m.buffers()))
        for i, p in enumerate(p for p in module.parameters() if id(p) not in seen):
            self.register_parameter(f"p{i}", p)
        for i, b in enumerate(b for b in module.buffers() if id(b) not in seen):
            self.register_buffer(f"b{i}", b, persistent=False)

    def forward(self, *args):
        return self.inner(*args)


def trace_module(module: nn.Module, example: Callable[[], tuple], optimize: bool = True):
    """``torch.jit.trace`` of ``module`` on the inputs ``example()`` builds (outside
    inference mode, so that the graph may write its cache inputs in place), then run twice
    as requests run it (inference mode), so that TorchScript's profiling runs and
    optimization happen at load, not in the first request (whose time to first audio would
    otherwise grow by seconds). Keep the graph outside the module tree (e.g. in the owner's
    ``__dict__``), so that ``state_dict`` stays the official one.

    ``optimize=False``: return an :class:`AsRecorded` graph (results that never depend on
    the shapes of earlier calls; its two runs at load then only build the executor's plan);
    else the ``ScriptModule`` itself."""
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarning: shapes are read, positions fixed
        args = example()
        graph = torch.jit.trace(_Flat(module), args, check_trace=False)
    run = graph if optimize else AsRecorded(graph)
    with torch.inference_mode():
        for _ in range(2):
            run(*args)
    return run


__all__ = ["AsRecorded", "trace_module"]
