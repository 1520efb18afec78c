"""The compiler's errors: what a project's files can get wrong. Every message names the file, view,
column or batch and says what to do. The errors only a running night can meet (a bad change batch,
an out-of-order batch, an unreachable warehouse, a changed plan) live in runtime/errors.py."""


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


class NotIncremental(UnsupportedView):
    """Valid SQL that no incremental rule covers (an outer join, a window function, ...): the compiler
    keeps the view by recompute and the message is the reason `nightshift plan` prints. Raised as an
    error only where a view must be incremental ([views] <name> = "incremental")."""
