"""The long-running daemon: lifecycle, signals, systemd, the HTTP side port."""
