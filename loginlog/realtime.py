"""TEMPORARY alias while the layout moves: this module is now ``loginlog.bitmaps``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("loginlog.bitmaps")
