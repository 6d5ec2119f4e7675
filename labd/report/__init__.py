"""Self-contained HTML reports of jobs, comparisons and histories."""
