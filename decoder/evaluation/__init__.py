"""`parafill eval`: completion quality and decoding parallelism on held-out Python files."""
