"""TEMPORARY alias while the layout moves: this module is now ``stats.devtools.simulate``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("stats.devtools.simulate")
