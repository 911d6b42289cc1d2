"""Reading foreign environment files (environment.yml, requirements, Dockerfiles) into a spec, and lint.
Takes files a team already has; hands on a spec file and findings.
"""
