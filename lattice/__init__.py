"""nightshift's compiler: view SQL -> IR -> maintenance plan and the SQL of every step (no Spark, no DB)."""

from lattice.compile import compile_project
from lattice.errors import NightshiftError

__all__ = ["compile_project", "NightshiftError"]
