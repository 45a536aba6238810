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
        graph = torch.jit.trace(module, args, check_trace=False)
    run = graph if optimize else AsRecorded(graph)
    with torch.inference_mode():
        for _ in range(2):
            run(*args)
    return run


__all__ = ["AsRecorded", "trace_module"]
