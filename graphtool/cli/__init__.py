"""The command line: parses options, calls one library function, renders, returns an exit code."""
