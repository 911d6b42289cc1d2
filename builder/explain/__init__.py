"""`envbuild explain`: a pasted error log to findings (what happened, why, and the fix in envbuild's terms).

What explain knows is data. `builder/data/explain_rules.yaml` holds the message families: each is a
message template from a named upstream source (PyTorch, CUDA, NVML, NCCL, the dynamic loader, conda,
pip ...) whose variable parts are placeholders captured by name (`CUDA error: {error}`), with the
finding's message and fix. `builder/data/error_codes.yaml` holds the enumerations those placeholders
resolve to (every cudaError_t, nvmlReturn_t, ncclResult_t: number, name, printed text, meaning), so
`CUDA error: no kernel image ...`, `error=209`, `cudaErrorNoKernelImageForDevice` and
`CUDA_ERROR_NO_BINARY_FOR_GPU` all land on one family. A few families need judgement the data cannot
hold (which build runs on this driver and GPU) and get a refining function (`@refines`).

Besides families, explain reads the facts a log states (driver and its CUDA, toolkit, torch and its
CUDA, GPUs and their compute capability, Python, OS, container) and decides with the compatibility
data (builder/data/compat.yaml) and the log's facts before this host's, so a fix never names a build
the stated driver or GPU cannot run. A log with no known family still gets its facts and a next step.

Input is bounded (`read_log`): a huge file is read as its head and tail, an endless stdin is cut,
binary data and UTF-16 are recognised, so any input costs bounded memory and answers in one line.
`explain_text()` is a pure function of the text and the context, so recorded logs test everything.

The modules, each importing only those above it:
  log_input          bounded reading and decoding of the input
  normalise          the log as its program printed it (colour codes, timestamps, runner prefixes, wraps)
  log_text           the log as searchable text (needles, windows, line numbers)
  message_templates  a message with named placeholders, compiled to a regex and a needle
  error_codes        the error-code tables
  families           the data file loaded: message families, their causes, the fact patterns
  boards             GPU boards as people write them ("a 5080 GPU", "A100"), read through the GPU table
  facts              the facts a log states
  matching           the families a log holds, as hits (one per log line)
  machine            the machine a log ran on, and which CUDA builds its driver runs
  context            what a verdict reads: the log, its facts and hits, its machine, the host, the spec
  builds             the spec's target or released build to recommend
  refining           how a hit is told: the data's words, or a refiner's
  compat_fixes       refiners that choose builds and drivers with the compatibility data; the next step
  message_fixes      refiners that read more out of the message itself
  conflict_report    a resolver's conflict report (pip, uv) as requirement lines, and the pair no release meets
  judging            a judgement per finding from the log's facts and phase (explain_judgements.yaml)
  unrecognised       when no family matches: the lines read as the likely error (explain_unrecognised.yaml)
  report             `explain_text`, `explain_stream`, the rule registry, the report and the catalogue
"""
