"""The file formats envbuild reads from more than one stage or writes, each a typed model with its one reader
or writer: a stage takes or builds the model, never the file's text.
"""
