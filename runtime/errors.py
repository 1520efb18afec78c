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


class WarehouseStateError(WarehouseError):
    """The warehouse is reachable, but it or the night's summary-deltas are not in the state the step needs (no
    summary tables yet, summary-deltas missing or computed for another state, a summary table out of sync with
    the base, a night not validated before publish): the message names the command that fixes it."""


class PlanChanged(NightshiftError):
    """The summary definitions changed since the summary tables were materialized."""


# A step that fails with one of these refused the night as it stands: the same batch against the same lake,
# ledger and summary layer fails the same way, so a DAG task that meets one fails at once instead of retrying
# (a rerun once the cause is fixed is safe). The others (an unreachable warehouse or Spark server, a summary layer
# applied beside the night) may pass later.
RETRY_CANNOT_FIX = (BadChangeBatch, BatchOrderError, PlanChanged, WarehouseStateError)
# the exit code of a DAG's spark-submit step (nightshift/submit.py) that failed with one of RETRY_CANNOT_FIX
REFUSED_EXIT = 4
# how the command line and a DAG's spark-submit step print an error (the DAG's task finds it in the step's log)
ERROR_PREFIX = "nightshift: error: "


class InjectedCrash(RuntimeError):
    """Raised at a fault-injection checkpoint (tests only; see runtime.faults)."""
