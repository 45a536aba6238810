"""Harness self-check: echoes argv and saves one array. argv: any strings."""

import sys

import _official
from _official import save

import numpy as np

save({"argv": sys.argv[1:], "prefix": sys.prefix}, ramp=np.arange(6, dtype=np.float32).reshape(2, 3))
