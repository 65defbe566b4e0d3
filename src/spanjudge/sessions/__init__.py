"""spanjudge.sessions."""
