"""TEMPORARY alias while the layout moves: this module is now ``stats.counters.rankings``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("stats.counters.rankings")
