"""Re-export of the error hierarchy (it lives in lattice/ so the pure compiler can raise it too)."""

from lattice.errors import (  # noqa: F401
    BadChangeBatch,
    BatchOrderError,
    ConfigError,
    NightshiftError,
    PlanChanged,
    SchemaError,
    UnknownReference,
    UnsupportedView,
    WarehouseError,
)


class InjectedCrash(RuntimeError):
    """Raised at a fault-injection checkpoint (tests only; see nightshift.faults)."""
