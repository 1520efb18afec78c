"""nightshift's compiler: view SQL -> IR -> maintenance plan and the SQL of every step (no Spark, no DB)."""

from lattice.errors import NightshiftError

__all__ = ["compile_project", "NightshiftError"]


def __getattr__(name: str):
    """compile_project is imported on first use (sqlglot and the compiler take a second to import): importing
    an error type from the package stays cheap."""
    if name == "compile_project":
        from lattice.compile import compile_project

        return compile_project
    raise AttributeError(f"module 'lattice' has no attribute {name!r}")
