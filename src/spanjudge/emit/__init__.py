"""spanjudge.emit."""
