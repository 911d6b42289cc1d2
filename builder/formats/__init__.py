"""The file formats envbuild reads from more than one stage, each a typed model with one reader: a stage
takes the model, never the file's text.
"""
