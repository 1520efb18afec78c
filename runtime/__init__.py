"""The runtime layer: what every step shares when a night runs (DESIGN.md, "Parts and where they live").

    errors     the runtime half of the error hierarchy (batch, order, warehouse, plan changes)
    lake       the lake's layout: change batches, base versions, summary-deltas, the state file
    options    the method switches, read from the environment and nightshift.toml once
    night      the night's plan: a frozen value computed once per batch, before anything runs
    manifest   the night's plan as propagate executed it, serialized (typed, versioned)
    capture    what nightshift capture records with a batch it wrote (an append source's watermark)
    serial     frozen dataclasses <-> JSON
    faults     fault-injection checkpoints (tests only)

Imports only lattice/ and the standard library (plus pyarrow to read Parquet footers).
"""
