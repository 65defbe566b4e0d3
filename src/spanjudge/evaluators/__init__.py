"""spanjudge.evaluators."""
