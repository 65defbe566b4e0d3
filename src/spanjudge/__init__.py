"""spanjudge."""
