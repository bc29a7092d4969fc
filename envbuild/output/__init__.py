"""What the user sees on a terminal: one-line messages (say), progress lines and lanes, the
resolve report and its check lines' text, JSON output and shell completion scripts."""
