"""Clock domains: CPU-GPU clock maps fitted from bracketed reads (``maps``) and the sync report (``report``).

Paper Section IV-A ("High-resolution CPU-GPU sync"), extended with drift
(offset and skew, piecewise over long campaigns) and an error bound.
"""
