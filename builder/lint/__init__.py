"""`envbuild lint`: advice on a spec or on an environment file a team has, read through init's readers and
judged against the compatibility data and the spec's fleet. Hands on findings.
"""
