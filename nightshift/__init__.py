"""nightshift: nightly batch-window maintenance of warehouse summary tables (summary-delta method)."""

__version__ = "0.1.0"
