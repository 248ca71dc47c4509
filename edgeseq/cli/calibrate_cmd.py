"""(commands are added here by their issue)."""
