# shellcheck shell=bash
# Sourced by up.sh and down.sh: how a lease names the process holding it.

# "PID STARTTIME": the start time tells a live holder from a new process that reused its PID.
process_identity() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    echo "$1 $(awk '{ print $20 }' <<<"$stat")"
}
