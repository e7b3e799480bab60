"""The staff face of the statistics: the admin site whose index is the dashboard, the partner page, charts."""
