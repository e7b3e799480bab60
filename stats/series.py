"""TEMPORARY alias while the layout moves: this module is now ``stats.counters.series``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("stats.counters.series")
