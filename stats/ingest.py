"""TEMPORARY alias while the layout moves: this module is now ``stats.pipeline.ingest``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("stats.pipeline.ingest")
