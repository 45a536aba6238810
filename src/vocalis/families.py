"""The family registry: model id -> the :class:`~vocalis.family.ModelFamily` that runs it.

This is the only module outside ``vocalis.models`` that names a family. The built-in
families are imported when first needed (their front halves are light: no weights, no
kernels). Other families join with :func:`register` (a running program, tests), with an
entry point in the group ``vocalis.families`` (an installed package: the entry point names
a :class:`~vocalis.family.ModelFamily` object or class), or with ``$VOCALIS_FAMILIES``
(``module:attribute`` items, comma-separated: e.g. a family served by ``vocalis serve``
without packaging it).

A model id belongs to the first family that claims it, in registration order (the built-in
ones first).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from importlib.metadata import entry_points
from pathlib import Path

from vocalis.errors import InputError, ModelNotFound
from vocalis.family import ModelFamily, ModelInfo
from vocalis.options import did_you_mean

log = logging.getLogger(__name__)

#: the built-in families, ``module:attribute``, in the order they claim ids
BUILTIN = ("vocalis.models.pocket.front:FAMILY", "vocalis.models.qwen3.front:FAMILY")
ENTRY_POINT_GROUP = "vocalis.families"
ENV = "VOCALIS_FAMILIES"

_lock = threading.RLock()
_families: list[ModelFamily] = []
_started = False


def _import(spec: str) -> ModelFamily:
    module, _, attr = spec.partition(":")
    obj = getattr(importlib.import_module(module), attr or "FAMILY")
    return obj() if isinstance(obj, type) else obj


def _start() -> None:
    """Import the built-in families, entry points and ``$VOCALIS_FAMILIES`` (once)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
        for spec in BUILTIN:
            _add(_import(spec))
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                _add(_import(ep.value))
            except Exception as e:  # a broken plug-in must not take the built-in ones down
                log.warning("model family plug-in %s (%s) not loaded: %s", ep.name, ep.value, e)
        for spec in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
            try:
                _add(_import(spec))
            except (ImportError, AttributeError, ValueError) as e:
                raise InputError(f"${ENV}: cannot load the model family {spec!r} ({e}): give "
                                 "module:attribute items, comma-separated") from None


def _add(family: ModelFamily) -> None:
    if not isinstance(family, ModelFamily):
        raise ValueError(f"{family!r} is not a vocalis.family.ModelFamily")
    if not family.name or not family.title:
        raise ValueError(f"{type(family).__name__}: a family needs a name and a title")
    if any(f.name == family.name for f in _families):
        raise ValueError(f"a model family named {family.name!r} is already registered")
    for other in _families:  # a front end spells an option once for every family
        for kind in ("options", "load_options", "random_options"):
            theirs = getattr(other, kind)
            for opt in getattr(family, kind):
                if opt.name in theirs and theirs[opt.name].type is not opt.type:
                    raise ValueError(f"{family.name}: option {opt.name!r} has type "
                                     f"{opt.type.__name__}, but {other.name} declares it "
                                     f"{theirs[opt.name].type.__name__}: rename it")
    _families.append(family)


def register(family: ModelFamily) -> ModelFamily:
    """Add ``family`` after the families known so far; returns it.

    Raises ValueError: not a ModelFamily, a name already taken, or an option that another
    family declares with another type (front ends spell each option once)."""
    with _lock:
        _start()
        _add(family)
    return family


def unregister(name: str) -> None:
    """Remove the family ``name`` (tests; a no-op when it is not registered)."""
    with _lock:
        _families[:] = [f for f in _families if f.name != name]


def all_families() -> list[ModelFamily]:
    """Every registered family, in the order they claim ids."""
    with _lock:
        _start()
        return list(_families)


def family_of(model_id: str) -> ModelFamily:
    """The family of ``model_id`` (an id, a Hub repo id, a checkpoint's path).

    Raises ModelNotFound: no family claims it (the message suggests the closest id)."""
    if not isinstance(model_id, str) or not model_id.strip():
        raise ModelNotFound("model id is empty: give a model id (`vocalis models list`) or a "
                            "checkpoint's path", param="model")
    mid = model_id.strip()
    for family in all_families():
        if family.claims(mid):
            return family
    if Path(mid).expanduser().exists():  # a checkpoint of no family known here
        hints = "; ".join(f"{f.title}: {f.checkpoint_hint}" for f in all_families()
                          if f.checkpoint_hint)
        raise ModelNotFound(f"{model_id!r} is no model checkpoint vocalis knows ({hints})",
                            param="model")
    ids = model_ids()
    raise ModelNotFound(f"unknown model {model_id!r}{did_you_mean(mid, ids)}: not a released "
                        "model id and no such checkpoint file or folder; `vocalis models list` "
                        f"lists the {len(ids)} released ids", param="model")


def describe(model_id: str) -> ModelInfo:
    """:meth:`ModelFamily.describe` of the family of ``model_id`` (config only, no weights).

    Raises ModelNotFound."""
    return family_of(model_id).describe(model_id.strip())


def model_ids() -> list[str]:
    """Every released model id of every family."""
    return [m for f in all_families() for m in f.model_ids()]


def random_family(config: str) -> ModelFamily:
    """The family whose random checkpoints ``config`` names (``vocalis models random``).

    Raises InputError: no family knows it (the message suggests the closest)."""
    for family in all_families():
        if family.random_config(config) is not None:
            return family
    known = [c for f in all_families() for c in f.random_configs()]
    raise InputError(f"unknown config {config!r}{did_you_mean(config.strip(), known)}: give a "
                     "released model id (`vocalis models list`)", param="config")


def is_random_checkpoint(folder) -> bool:
    """Whether ``folder`` holds a random checkpoint that vocalis wrote (any family's)."""
    return any(f.is_random_checkpoint(folder) for f in all_families())


def default_model_id() -> str:
    """The model used when none is named: the first family's first released id."""
    return all_families()[0].model_ids()[0]


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "ENV", "all_families", "default_model_id", "describe",
           "family_of", "is_random_checkpoint", "model_ids", "random_family", "register",
           "unregister"]
