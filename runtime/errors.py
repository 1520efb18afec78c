"""The error hierarchy of a running night. The compiler's errors (NightshiftError, ConfigError,
SchemaError, UnsupportedView, UnknownReference) live in lattice/errors.py, since the pure compiler
raises them; the ones only a running step can meet live here. Every message names the file, view,
column or batch and says what to do next."""

from __future__ import annotations

from lattice.errors import (  # noqa: F401  (re-exported: one import site for every step)
    ConfigError,
    NightshiftError,
    SchemaError,
    UnknownReference,
    UnsupportedView,
)


class BadChangeBatch(NightshiftError):
    """A change batch does not match the schema, or its rows contradict the base tables."""


class BatchOrderError(NightshiftError):
    """A batch is out of order, or the lake and warehouse disagree about which batches are applied."""


class WarehouseError(NightshiftError):
    """The warehouse is unreachable or not in the state a step needs."""


class PlanChanged(NightshiftError):
    """The summary definitions changed since the summary tables were materialized."""


class InjectedCrash(RuntimeError):
    """Raised at a fault-injection checkpoint (tests only; see runtime.faults)."""
