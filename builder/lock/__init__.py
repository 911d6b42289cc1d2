"""Locking a Target: environment.yml, conda-lock with the solver service, the pip part, the lockfile model.
Takes a Target; hands on a conda-lock.yml (one reader: lockfile.read_lock) and the installer's plans.
"""
