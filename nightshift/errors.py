"""The whole error hierarchy in one import for the application (compile-time errors from lattice/,
runtime errors from runtime/)."""

from runtime.errors import (  # noqa: F401
    BadChangeBatch,
    BatchOrderError,
    ConfigError,
    InjectedCrash,
    NightshiftError,
    PlanChanged,
    SchemaError,
    UnknownReference,
    UnsupportedView,
    WarehouseError,
    WarehouseStateError,
)
