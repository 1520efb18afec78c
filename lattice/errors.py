"""The error hierarchy. Every message names the file, view, column or batch and says what to do."""


class NightshiftError(Exception):
    """Base of every error nightshift reports to a user (exit code 1, message on stderr)."""


class ConfigError(NightshiftError):
    """nightshift.toml or the project folder is malformed."""


class SchemaError(NightshiftError):
    """sql/schema.sql cannot be understood."""


class UnsupportedView(NightshiftError):
    """A summary view uses SQL the summary-delta method cannot maintain (yet)."""


class UnknownReference(UnsupportedView):
    """A summary view names a table or column that sql/schema.sql does not declare."""


class BadChangeBatch(NightshiftError):
    """A change batch does not match the schema, or its rows contradict the base tables."""


class BatchOrderError(NightshiftError):
    """A batch is out of order, or the lake and warehouse disagree about which batches are applied."""


class WarehouseError(NightshiftError):
    """The warehouse is unreachable or not in the state a step needs."""


class PlanChanged(NightshiftError):
    """The summary definitions changed since the summary tables were materialized."""
