# shellcheck shell=bash
# Sourced by up.sh and down.sh: how a lease names the process holding it.

# "PID STARTTIME": the start time tells a live holder from a new process that reused its PID.
process_identity() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    echo "$1 $(awk '{ print $20 }' <<<"$stat")"
}

# A lease naming a process is live while that very process (same start time) runs; one naming
# no process (a manual `up`) is live until its `down`.
lease_is_live() {
    local recorded pid
    recorded=$(cat "$1" 2>/dev/null) || return 1
    [[ -z $recorded ]] && return 0
    pid=${recorded%% *}
    [[ $(process_identity "$pid" 2>/dev/null) == "$recorded" ]]
}

# Whether the world at state dir $1 still has a live lease.
world_is_leased() {
    local lease
    for lease in "$1"/leases/*; do
        [[ -f $lease ]] && lease_is_live "$lease" && return 0
    done
    return 1
}
