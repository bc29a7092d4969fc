"""What every stage leans on and none owns: where envbuild's files live (paths), writing a file
whole or not at all (atomic), the errors that end a command with one line (errors), URLs with
their credentials masked (urls), the PyPI client (pypi) and the one data-only user cache."""
