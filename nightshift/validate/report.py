"""What nightshift validate reports: its settings ([validate] in nightshift.toml), each failed
expectation (Finding), the night's report, and the error that blocks publish."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nightshift.config import Project
from runtime.errors import ConfigError, NightshiftError

DEFAULT_SAMPLE = 50
DEFAULT_ROW_TOLERANCE = 0.5
DEFAULT_KEEP_RESULTS = 30
DOCS_HISTORY = 1000  # validation results the data docs index lists (newest first)


class ValidationFailed(NightshiftError):
    """A critical expectation failed: the night must not be published."""

    def __init__(self, report: "ValidationReport"):
        self.report = report
        super().__init__(report.message())


@dataclass(frozen=True)
class Settings:
    """[validate] in nightshift.toml."""

    sample: int = DEFAULT_SAMPLE  # random groups per summary table: this many from it, this many from the base
    row_tolerance: float = DEFAULT_ROW_TOLERANCE  # warn when the row count moves more than this fraction
    keep_results: int = DEFAULT_KEEP_RESULTS  # validation runs kept in gx/validations and the data docs


def settings_of(project: Project, sample: int | None = None) -> Settings:
    section = project.settings.get("validate", {})
    file = project.root / "nightshift.toml"
    if not isinstance(section, dict):
        raise ConfigError(f"{file}: [validate] must be a table")
    n = section.get("sample", DEFAULT_SAMPLE) if sample is None else sample
    tol = section.get("row_count_tolerance", DEFAULT_ROW_TOLERANCE)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ConfigError(f"{file}: [validate] sample must be a whole number >= 0, got {n!r}")
    if not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol < 0:
        raise ConfigError(f"{file}: [validate] row_count_tolerance must be a number >= 0, got {tol!r}")
    keep = section.get("keep_results", DEFAULT_KEEP_RESULTS)
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise ConfigError(f"{file}: [validate] keep_results must be a whole number >= 1, got {keep!r}")
    return Settings(n, float(tol), keep)


@dataclass(frozen=True)
class Finding:
    """One failed expectation."""

    batch: str
    view: str
    table: str
    check: str
    severity: str
    observed: object  # unexpected row count, or the observed value (row count)
    examples: tuple = ()
    error: str | None = None
    docs: str | None = None

    def __str__(self) -> str:
        if self.error:
            what = f"could not run: {self.error}"
        elif self.check == "row_count_vs_previous":
            what = f"{self.observed} rows is outside the allowed range of the previous night's count"
        else:
            what = f"{self.observed} unexpected row(s)" + (f", e.g. ({_show(self.examples[0])})" if self.examples else "")
        where = f"; data docs: {self.docs}" if self.docs else ""
        return f"batch {self.batch}: summary table {self.view} ({self.table}): check {self.check} failed ({self.severity}): {what}{where}"


@dataclass(frozen=True)
class ValidationReport:
    batch: str
    expectations: int
    failures: tuple[Finding, ...]
    warnings: tuple[Finding, ...]
    docs: Path
    seconds: float
    sampled: dict = field(default_factory=dict)  # view -> number of sampled groups

    @property
    def success(self) -> bool:
        return not self.failures

    def message(self) -> str:
        head = (f"validate {self.batch}: {len(self.failures)} critical check(s) failed; the night stays unpublished"
                if self.failures else f"validate {self.batch}: ok")
        lines = [head] + [str(f) for f in self.failures] + [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines + [f"data docs: {self.docs}"])



def _show(row) -> str:
    return ", ".join(f"{k}={v}" for k, v in dict(row).items())
