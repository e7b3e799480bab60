"""The admin, the API's pages and the production server in a real browser (Debian's chromium under Playwright).

scripts/test runs these tests in its MariaDB pass only (``one_pass``): on two cores shared by both passes they
were the largest share of the suite's CPU (chromium and the live server, about 190 CPU seconds a pass). What
they check is the pages: layout, languages, charts, downloads, the production server's assets. The numbers the
pages show come from the selectors that tests/admin and the API tests check against both databases and both
Redis layouts, in both passes.
"""

# How long a page action may take (Playwright's default timeout for each page). A wait, not a speed test: on a
# loaded 2-core machine a full-page screenshot of the admin took over 30 s (CI of 2026-11-27, its suite at 15
# minutes), and the test that found the right numbers failed on the picture.
PAGE_TIMEOUT_MS = 120_000
