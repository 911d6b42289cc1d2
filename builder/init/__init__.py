"""Reading foreign environment files (environment.yml, requirements, Dockerfiles) into a spec.
Takes files a team already has; hands on a spec file and what was derived, assumed or left out.
"""
