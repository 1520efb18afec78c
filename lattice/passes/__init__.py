"""One module per pass; lattice/compile.py lists them in order."""
