"""What a user writes and what describes a target: recipes (schema, text with line numbers,
checks), toolchain files and lock files."""
