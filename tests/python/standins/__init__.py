"""`import standins` puts the stand-in frameworks first on sys.path (see README.md); it must
come before any import of sbx.adapters."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
