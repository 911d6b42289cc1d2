"""Build contexts, Dockerfile rendering, the Docker build and push, and smoke runs of a built image.
Takes a Target and its lock; hands on an image and a smoke report.
"""
