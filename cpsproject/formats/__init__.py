"""Number formats that differ from Django's for our languages (``FORMAT_MODULE_PATH``)."""
