"""TEMPORARY alias while the layout moves: this module is now ``cpsproject.common.timeutil``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("cpsproject.common.timeutil")
