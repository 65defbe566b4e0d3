"""Recognition presets: turn spans into steps."""
