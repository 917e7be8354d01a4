"""`parafill bench`: where block diffusion pays off and where it does not, measured side by side.

- spans:     latency vs span length (block diffusion, AR, optionally llama.cpp on the same weights),
             with the log-log exponent of each curve
- threshold: tokens per forward and completion quality vs the commit threshold (decoder/evaluation)
- cache:     prefix cache, cold vs warm request latency at several context lengths
- plots:     the PNGs of the report

Variants are always measured interleaved in one run (a shared machine's load hits them alike), and the
ratios are the numbers to read. The LSP-path measurement lives with the server (lsp_server/cmd_bench.py).
"""
