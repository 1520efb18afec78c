"""PySpark entry points. Thin: they execute the SQL that lattice/ planned."""
