"""Locking a Target: environment.yml, conda-lock with the solver service, the pip part, the checks of what was locked.
Takes a Target; hands on a conda-lock.yml (read by builder.formats.conda_lock.read_lock) and the installer's plans.
"""
