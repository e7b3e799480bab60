"""The admin, the API's pages and the production server in a real browser (Debian's chromium under Playwright).

scripts/test runs these tests in its MariaDB pass only (``one_pass``): on two cores shared by both passes they
were the largest share of the suite's CPU (chromium and the live server, about 190 CPU seconds a pass). What
they check is the pages: layout, languages, charts, downloads, the production server's assets. The numbers the
pages show come from the selectors that tests/admin and the API tests check against both databases and both
Redis layouts, in both passes.
"""
