"""The command line: click commands that parse arguments, call the library and print.
Owns argument parsing and the mapping of library errors to one line and an exit code; hands nothing on.
"""
