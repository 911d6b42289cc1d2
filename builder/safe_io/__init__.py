"""The paths a user names, read and written safely by construction, and standard output with its errors
checked: reading (regular files and stdin, capped), writing (whole files, never onto a device), stdout,
OSError words, and a lock between envbuild processes.
"""
