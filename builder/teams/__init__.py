"""What a team runs on top of images: onboarding, the target matrix, generated CI, Kubernetes jobs, summaries.
Takes Targets, locks and images; hands on files for a team's repository and reports.
"""
