"""The `labd` command line."""
