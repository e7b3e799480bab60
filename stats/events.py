"""TEMPORARY alias while the layout moves: this module is now ``stats.pipeline.events``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("stats.pipeline.events")
