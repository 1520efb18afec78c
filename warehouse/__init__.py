"""SQLAlchemy side: summary tables, staging, the refresh transaction, ledger, serving views."""
