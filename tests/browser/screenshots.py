"""Screenshots for a person to look at: no test asserts on them.

``scripts/test`` runs the suite twice side by side, and both passes would write the same files: one pass takes
none (``CPS_TEST_SCREENSHOTS=0``). Chromium's full-page PNGs and their transfer cost a third of a browser
test's CPU on a machine the other pass keeps busy.
"""

import os
from pathlib import Path

TAKEN = os.environ.get("CPS_TEST_SCREENSHOTS", "1") != "0"


def screenshot(target, path: Path, **options) -> None:
    """Save a screenshot of ``target`` (a Playwright page or locator) to ``path``, unless this run takes none."""
    if TAKEN:
        target.screenshot(path=path, **options)
