"""The versioned JSON Schema of graphtool's reports (package data)."""
