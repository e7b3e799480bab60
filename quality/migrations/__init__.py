# The view permissions of quality that the "statistics viewers" group holds (migration 0002).
PERMISSIONS = [
    ("quality", "view_qualityday"),
    ("quality", "view_finding"),
    ("quality", "view_listednetwork"),
]
